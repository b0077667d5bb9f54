// The default training corpus: about 1 MiB of English-like ASCII generated from a small grammar with a fixed
// seed, so a small byte-level GPT shows a clearly falling loss out of the box without any data download. The
// committed copy is assets/corpus/default.txt; tests/unit/test_corpus.cpp checks that it equals this
// function's output.
//
// The grammar, in brief (docs/corpus.md has the long form):
//   world     twelve named people, each with a fixed gender (he/she, him/her, his/her), job, daily activity,
//   home,
//             pet kind and pet name; eleven places, each with a fixed errand and three fixed facts; count
//             nouns with their plurals, colour and size adjectives, spots ("under the table") and time
//             openers.
//   paragraph one of: a story (lost object, errand with a companion, gift), a dialogue script ("Anna: ..."
//   lines),
//             a counting paragraph (counting aloud, adding, taking away, digits), a list (shopping list,
//             contents of a container with there was/there were), or a description of a person or a place.
//   agreement a/an before vowels, singular/plural nouns after number words, it/they and is/are with the
//   noun's
//             number, pronouns with the person's gender, sums that add up.
// Paragraphs are separated by a blank line; a "Chapter N" heading opens every few paragraphs. Only bytes 10
// and 32..126 occur. Randomness comes from us::Rng alone (never <random> distributions), so every platform
// produces the same bytes.
#pragma once

#include <cstdint>
#include <string>

namespace us {

// The seed behind assets/corpus/default.txt; changing it (or the grammar) means regenerating that file.
inline constexpr uint64_t k_default_corpus_seed = 20240601;

// Generation stops at the first paragraph boundary past this many bytes.
inline constexpr size_t k_default_corpus_target_bytes = size_t(1) << 20;

std::string generate_default_corpus();

// The same grammar with another seed and size (tests and experiments; the default corpus uses the constants
// above).
std::string generate_corpus(uint64_t seed, size_t target_bytes);

}  // namespace us
