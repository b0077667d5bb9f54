// The words a lesson's checks are printed in: each figure's kind (measured, predicted, formula, ...) and each
// comparison's symbol, as lesson.h declares them for the CLI and the GUI's lesson panel.
#include "app/lesson/lesson.h"

namespace us::lesson {

const char* source_name(FigureSource source) {
    switch (source) {
        case FigureSource::measured:
            return "measured";
        case FigureSource::predicted:
            return "predicted";
        case FigureSource::formula:
            return "formula";
        case FigureSource::derived:
            return "derived";
        case FigureSource::setting:
            return "setting";
        case FigureSource::constant:
            return "constant";
        case FigureSource::model:
            return "model";
    }
    return "?";
}

const char* comparison_symbol(Comparison op) {
    switch (op) {
        case Comparison::less:
            return "<";
        case Comparison::less_equal:
            return "<=";
        case Comparison::greater:
            return ">";
        case Comparison::greater_equal:
            return ">=";
        case Comparison::approx:
            return "~";
        case Comparison::equal:
            return "==";
    }
    return "?";
}

}  // namespace us::lesson
