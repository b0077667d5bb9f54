// Activation recomputation modes: what a block's forward keeps for its backward (none: everything; selective: all but
// the attention core; full: the block's input only). Here, beneath the settings, so that the activation byte
// formulas (activation_bytes.h) the engine and the analysis share can name the mode.
#pragma once

namespace us {

enum class Recompute { none, selective, full };

}  // namespace us
