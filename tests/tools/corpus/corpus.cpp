// The default corpus grammar: the world as tables of data (people, places, nouns, phrases), then one small
// function per paragraph kind. Facts about a person or a place never change between paragraphs, so the model
// has something to learn beyond spelling; the random choices keep it from memorising whole paragraphs.
#include "tests/tools/corpus/corpus.h"

#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "common/core/rng.h"

namespace us {
namespace {

// ---- [SECTION] the world

struct Person {
    const char* name;
    bool female;
    const char* job;
    const char* activity_base;  // "bake bread and cakes": after "I" or "to"
    const char* activity_3rd;   // "bakes bread and cakes": after he/she
    const char* home;
    const char* pet_kind;
    const char* pet_name;
    const char* food;  // a favourite, always the same
};

constexpr Person k_people[] = {
    {"Anna", true, "baker", "bake bread and cakes", "bakes bread and cakes", "near the river", "cat", "Pip", "honey"},
    {"Ben", false, "fisherman", "catch fish in the river", "catches fish in the river", "by the harbor", "dog", "Rex",
     "cheese"},
    {"Clara", true, "teacher", "teach the children to read", "teaches the children to read", "behind the school",
     "bird", "Sunny", "apples"},
    {"David", false, "farmer", "feed the goats and the hens", "feeds the goats and the hens", "on the hill", "goat",
     "Bell", "carrots"},
    {"Emma", true, "doctor", "visit the sick", "visits the sick", "next to the bakery", "cat", "Misty", "soup"},
    {"Felix", false, "painter", "paint pictures of the sea", "paints pictures of the sea", "above the post office",
     "dog", "Bruno", "pears"},
    {"Grace", true, "librarian", "look after the books", "looks after the books", "near the library", "rabbit",
     "Clover", "tea"},
    {"Henry", false, "carpenter", "make tables and chairs", "makes tables and chairs", "near the old mill", "horse",
     "Thunder", "bread"},
    {"Iris", true, "gardener", "grow roses and beans", "grows roses and beans", "at the edge of the forest", "tortoise",
     "Pebble", "plums"},
    {"Jack", false, "sailor", "sail to the islands", "sails to the islands", "by the harbor", "parrot", "Captain",
     "fish"},
    {"Lucy", true, "musician", "play the violin", "plays the violin", "on the village square", "dog", "Daisy", "cake"},
    {"Oscar", false, "shopkeeper", "sell lamps and candles", "sells lamps and candles", "near the market", "cat",
     "Ginger", "rice"},
};

struct Place {
    const char* name;
    const char* where;   // the name with its preposition: "at the market", "in the garden"
    const char* errand;  // after "to"
    const char* facts[3];
};

constexpr Place k_places[] = {
    {"the market",
     "at the market",
     "buy some fruit",
     {"The market is busy in the morning.", "Farmers sell apples, pears and cheese there.",
      "There is a fountain in the middle of the market."}},
    {"the river",
     "by the river",
     "catch some fish",
     {"The river is wide and slow.", "Ducks swim near the bridge.", "In summer the children swim there."}},
    {"the old mill",
     "at the old mill",
     "buy some flour",
     {"The old mill stands on the hill.", "Its wheel turns all day.", "The miller grinds wheat into flour."}},
    {"the school",
     "at the school",
     "meet the teacher",
     {"The school has six classrooms.", "The bell rings at eight o'clock.", "The children play in the yard at noon."}},
    {"the harbor",
     "at the harbor",
     "watch the boats",
     {"The harbor is full of boats.", "The sailors tie ropes to the posts.", "Gulls cry over the water."}},
    {"the forest",
     "in the forest",
     "pick some mushrooms",
     {"The forest is dark and quiet.", "Tall pine trees grow there.", "Foxes and deer live in the forest."}},
    {"the bakery",
     "at the bakery",
     "buy some bread",
     {"The bakery smells of warm bread.", "It opens at six o'clock.", "The cakes sit in the window."}},
    {"the library",
     "in the library",
     "return a book",
     {"The library is quiet.", "It has thousands of books.", "People read at the long tables."}},
    {"the village square",
     "on the village square",
     "meet a friend",
     {"The village square has a big clock.", "On Sundays there is music there.", "Old people sit on the benches."}},
    {"the garden",
     "in the garden",
     "water the flowers",
     {"The garden is full of flowers.", "Bees fly from rose to rose.", "There is a pond with small fish."}},
    {"the post office",
     "at the post office",
     "send a letter",
     {"The post office is next to the bank.", "It closes at five o'clock.",
      "The postman leaves with his bag at nine."}},
};

struct Noun {
    const char* one;
    const char* many;
};

constexpr Noun k_objects[] = {
    {"apple", "apples"}, {"basket", "baskets"},     {"bell", "bells"},       {"book", "books"},   {"bottle", "bottles"},
    {"box", "boxes"},    {"brush", "brushes"},      {"candle", "candles"},   {"coin", "coins"},   {"cup", "cups"},
    {"egg", "eggs"},     {"feather", "feathers"},   {"hat", "hats"},         {"key", "keys"},     {"knife", "knives"},
    {"lamp", "lamps"},   {"leaf", "leaves"},        {"letter", "letters"},   {"map", "maps"},     {"orange", "oranges"},
    {"pear", "pears"},   {"ribbon", "ribbons"},     {"scarf", "scarves"},    {"shell", "shells"}, {"spoon", "spoons"},
    {"stone", "stones"}, {"umbrella", "umbrellas"}, {"whistle", "whistles"},
};

constexpr const char* k_adjectives[] = {"red", "blue",  "green", "yellow", "small",  "big",   "old",
                                        "new", "shiny", "heavy", "little", "wooden", "round", "striped"};

constexpr const char* k_containers[] = {"basket", "box", "bag", "drawer", "cupboard", "chest", "jar"};

constexpr const char* k_spots[] = {"under the table", "behind the door", "on the shelf",    "next to the window",
                                   "in the cupboard", "near the gate",   "beside the well", "on the bench",
                                   "under the bed",   "in the kitchen",  "by the stairs",   "on the windowsill"};

constexpr const char* k_times[] = {"One morning",  "One evening",     "On Monday",           "On Tuesday",
                                   "On Wednesday", "On Thursday",     "On Friday",           "On Saturday",
                                   "On Sunday",    "After breakfast", "In the afternoon",    "Early the next day",
                                   "Last week",    "Yesterday",       "When the sun came up"};

constexpr const char* k_motions[] = {"walked", "went", "ran", "hurried", "cycled"};

constexpr const char* k_weather[] = {"It was a sunny day.", "The sky was grey and it was raining.",
                                     "A cold wind was blowing.", "It was warm and bright.", "Snow lay on the roofs."};

constexpr const char* k_foods[] = {"bread",  "milk",    "eggs",  "cheese", "butter", "tea",   "honey",
                                   "apples", "carrots", "flour", "sugar",  "rice",   "plums", "soup"};

constexpr const char* k_number_words[] = {"zero",     "one",      "two",      "three",   "four",    "five",
                                          "six",      "seven",    "eight",    "nine",    "ten",     "eleven",
                                          "twelve",   "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                                          "eighteen", "nineteen", "twenty"};

constexpr const char* k_ordinals[] = {"first", "second", "third", "fourth", "fifth"};

constexpr const char* k_days[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

constexpr size_t k_people_count = std::size(k_people);

// ---- [SECTION] words and agreement

template <class... Parts>
std::string cat(const Parts&... parts) {
    std::string out;
    (out += ... += parts);
    return out;
}

const char* he(const Person& p) { return p.female ? "she" : "he"; }
const char* him(const Person& p) { return p.female ? "her" : "him"; }
const char* his(const Person& p) { return p.female ? "her" : "his"; }

std::string capitalized(std::string s) {
    if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = char(s[0] - 'a' + 'A');
    return s;
}

bool starts_with_vowel(const std::string& word) {
    return !word.empty() && std::string_view("aeiou").find(word[0]) != std::string_view::npos;
}

// "a red apple", "an old key", "three red apples".
std::string counted(int count, const Noun& noun, const char* adjective = nullptr) {
    const std::string rest = cat(adjective ? cat(adjective, " ") : std::string(), count == 1 ? noun.one : noun.many);
    if (count == 1) return cat(starts_with_vowel(rest) ? "an " : "a ", rest);
    return cat(k_number_words[count], " ", rest);
}

// "one apple", "five apples": number words even for one, as in counting.
std::string numbered(int count, const Noun& noun) {
    return cat(k_number_words[count], " ", count == 1 ? noun.one : noun.many);
}

// "a", "a and b", "a, b and c".
std::string joined(const std::vector<std::string>& items) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += (i + 1 == items.size()) ? " and " : ", ";
        out += items[i];
    }
    return out;
}

std::string sentences(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& part : parts) {
        if (!out.empty()) out += ' ';
        out += part;
    }
    return out;
}

// ---- [SECTION] paragraphs

class CorpusWriter {
public:
    explicit CorpusWriter(uint64_t seed) : m_rng(seed) {}

    std::string write(size_t target_bytes) {
        std::string out;
        int chapter = 0;
        int until_chapter = 0;
        while (out.size() < target_bytes) {
            if (until_chapter-- == 0) {
                out += cat("Chapter ", std::to_string(++chapter), "\n\n");
                until_chapter = between(5, 9);
            }
            out += paragraph();
            out += out.size() < target_bytes ? "\n\n" : "\n";
        }
        return out;
    }

private:
    // ---- choices; all of them go through m_rng so the output depends on the seed alone. Each draw is a
    // statement of its own (or alone in its expression): the order in which a call evaluates its arguments is
    // unspecified, so two draws in one call could give other text with another compiler.
    size_t below(size_t n) { return size_t(m_rng.next_below(n)); }
    int between(int lo, int hi) { return lo + int(m_rng.next_below(uint64_t(hi - lo + 1))); }
    bool chance(double p) { return m_rng.next_double() < p; }

    template <class T, size_t N>
    const T& pick(const T (&table)[N]) {
        return table[below(N)];
    }

    const Person& person() { return pick(k_people); }
    const Person& other_than(const Person& a) {
        const size_t i = size_t(&a - k_people);
        return k_people[(i + 1 + below(k_people_count - 1)) % k_people_count];
    }

    // `count` distinct indices below n, in random order (partial Fisher-Yates).
    std::vector<size_t> distinct(size_t count, size_t n) {
        std::vector<size_t> all(n);
        for (size_t i = 0; i < n; ++i) all[i] = i;
        for (size_t i = 0; i < count; ++i) std::swap(all[i], all[i + below(n - i)]);
        all.resize(count);
        return all;
    }

    std::string paragraph() {
        const size_t roll = below(100);
        if (roll < 14) return story_lost_object();
        if (roll < 28) return story_errand();
        if (roll < 38) return story_gift();
        if (roll < 58) return dialogue();
        if (roll < 72) return counting();
        if (roll < 84) return list();
        if (roll < 94) return person_description();
        return place_description();
    }

    // ---- stories: one line of sentences, the protagonist named once and then "he"/"she"

    std::string story_lost_object() {
        const Person& a = person();
        const Person& b = other_than(a);
        const Noun& noun = pick(k_objects);
        const bool plural = chance(0.3);
        const std::string thing = cat(pick(k_adjectives), " ", plural ? noun.many : noun.one);
        const char* it = plural ? "they" : "it";
        const char* it_obj = plural ? "them" : "it";
        const size_t s = below(std::size(k_spots));
        const std::string spot1 = k_spots[s], spot2 = k_spots[(s + 1 + below(3)) % std::size(k_spots)];
        const std::string found_at = chance(0.5) ? std::string(pick(k_spots)) : std::string(pick(k_places).where);
        const char* time = pick(k_times);
        const char* motion = pick(k_motions);
        const Place& place = pick(k_places);

        std::vector<std::string> out = {
            cat(time, ", ", a.name, " could not find ", his(a), " ", thing, "."),
            capitalized(
                cat(he(a), " looked ", spot1, " and ", spot2, ", but ", it, plural ? " were" : " was", " not there.")),
            cat("Then ", he(a), " ", motion, " to ", place.name, " and asked ", b.name, " for help."),
            cat("\"Have you seen my ", thing, "?\" asked ", a.name, "."),
        };
        if (chance(0.5)) {
            out.push_back(
                cat("\"Yes,\" said ", b.name, ". \"", capitalized(it), plural ? " are " : " is ", found_at, ".\""));
            out.push_back(cat(a.name, " found ", it_obj, " ", found_at, " and thanked ", b.name, "."));
        } else {
            out.push_back(cat("\"No,\" said ", b.name, ", \"but I will help you look.\""));
            out.push_back(
                cat("Together they looked everywhere, and at last ", b.name, " found ", it_obj, " ", found_at, "."));
        }
        if (chance(0.5)) out.push_back(cat(a.name, " was very happy."));
        return sentences(out);
    }

    std::string story_errand() {
        const Person& a = person();
        const Person& b = other_than(a);
        const Place& place = pick(k_places);
        const char* time = pick(k_times);
        const char* motion = pick(k_motions);
        std::vector<std::string> out = {
            cat(time, ", ", a.name, " ", motion, " to ", place.name, " to ", place.errand, "."),
        };
        if (chance(0.4)) out.push_back(pick(k_weather));
        out.push_back(cat("On the way, ", he(a), " met ", b.name, "."));
        out.push_back(cat("\"Where are you going?\" asked ", b.name, "."));
        out.push_back(cat("\"I am going to ", place.name, " to ", place.errand, ",\" said ", a.name, "."));
        if (chance(0.6)) {
            out.push_back(cat("\"Can I come too?\" asked ", b.name, ". \"Of course,\" said ", a.name, "."));
            out.push_back(cat("So they ", pick(k_motions), " to ", place.name, " together."));
        } else {
            const Place& elsewhere = pick(k_places);
            const char* b_motion = pick(k_motions);
            out.push_back(
                cat("\"Good luck,\" said ", b.name, ", and ", he(b), " ", b_motion, " on to ", elsewhere.name, "."));
        }
        out.push_back(pick(place.facts));
        if (chance(0.5)) {
            out.push_back(cat(a.name, " came home before dinner."));
        } else {
            const char* home_motion = pick(k_motions);
            out.push_back(cat("In the evening, ", he(a), " ", home_motion, " home."));
        }
        return sentences(out);
    }

    std::string story_gift() {
        const Person& a = person();
        const Person& b = other_than(a);
        const Noun& noun = pick(k_objects);
        const int count = between(1, 5);
        const char* adjective = chance(0.6) ? pick(k_adjectives) : nullptr;
        const char* it_obj = count == 1 ? "it" : "them";
        constexpr const char* k_praise[] = {"lovely", "beautiful", "perfect", "just what I needed"};
        const char* time = pick(k_times);
        const char* motion = pick(k_motions);
        const Place& place = pick(k_places);
        const char* praise = pick(k_praise);
        const char* spot = pick(k_spots);
        std::vector<std::string> out = {
            cat(time, ", ", a.name, " ", motion, " to ", place.name, "."),
            cat("There ", he(a), " bought ", counted(count, noun, adjective), " for ", b.name, "."),
            cat("Later, ", he(a), " gave ", it_obj, " to ", b.name, "."),
            cat("\"Thank you, ", a.name, "!\" said ", b.name, ". \"", count == 1 ? "It is " : "They are ", praise,
                ".\""),
            capitalized(cat(he(b), " put ", it_obj, " ", spot, ".")),
        };
        return sentences(out);
    }

    // ---- dialogue: a script, one "Name: words" line per turn

    std::string dialogue() {
        const Person& a = person();
        const Person& b = other_than(a);
        std::vector<std::string> lines;
        const Person* last_speaker = nullptr;
        // Two turns in a row by one speaker become one line, as in a play.
        auto say = [&](const Person& who, const std::string& words) {
            if (&who == last_speaker) {
                lines.back() += cat(" ", words);
            } else {
                lines.push_back(cat(who.name, ": ", words));
            }
            last_speaker = &who;
        };

        constexpr const char* k_greetings[] = {"Good morning", "Hello", "Good evening", "Hi"};
        const char* greeting = pick(k_greetings);
        say(a, cat(greeting, ", ", b.name, "."));
        if (chance(0.5)) {
            say(b, cat(greeting, ", ", a.name, ". How are you?"));
            say(a, chance(0.5) ? "I am well, thank you." : "I am a little tired, but I am fine.");
        } else {
            say(b, cat(greeting, ", ", a.name, "."));
        }
        // One or two different topics.
        constexpr size_t k_topics = 6;
        const size_t first_topic = below(k_topics);
        const size_t second_topic = (first_topic + 1 + below(k_topics - 1)) % k_topics;
        for (size_t topic : {first_topic, second_topic}) {
            if (topic == second_topic && chance(0.5)) break;
            switch (topic) {
                case 0:
                    dialogue_have(a, b, say);
                    break;
                case 1:
                    dialogue_going(b, a, say);
                    break;
                case 2:
                    dialogue_pet(a, b, say);
                    break;
                case 3:
                    dialogue_where(a, b, say);
                    break;
                case 4:
                    dialogue_job(a, b, say);
                    break;
                default:
                    dialogue_how_many(a, b, say);
                    break;
            }
        }
        constexpr const char* k_farewells[] = {"Goodbye", "See you tomorrow", "Have a nice day"};
        const char* farewell = pick(k_farewells);
        say(b, cat(farewell, ", ", a.name, "."));
        std::string out;
        for (const auto& line : lines) out += out.empty() ? line : cat("\n", line);
        return out;
    }

    template <class Say>
    void dialogue_have(const Person& a, const Person& b, Say& say) {
        const Noun& noun = pick(k_objects);
        say(a, cat("Do you have ", counted(1, noun), "?"));
        if (chance(0.7)) {
            const int count = between(1, 6);
            say(b, count == 1 ? std::string("Yes, I have one.") : cat("Yes, I have ", numbered(count, noun), "."));
            say(a, count == 1 ? "Can I borrow it?" : "Can I borrow one?");
            say(b, chance(0.6) ? "Of course. Here you are." : "Yes, but please bring it back tomorrow.");
        } else {
            const Person& c = other_than(b);
            if (&c == &a) {
                say(b, cat("No, I do not have ", counted(1, noun), ". Sorry."));
            } else {
                say(b, cat("No, I do not have ", counted(1, noun), ". Ask ", c.name, "."));
            }
        }
    }

    template <class Say>
    void dialogue_going(const Person& asker, const Person& goer, Say& say) {
        const Place& place = pick(k_places);
        say(asker, cat("Where are you going, ", goer.name, "?"));
        say(goer, cat("I am going to ", place.name, " to ", place.errand, "."));
        say(asker, chance(0.5) ? "Can I come with you?" : "Say hello from me.");
    }

    template <class Say>
    void dialogue_pet(const Person& a, const Person& b, Say& say) {
        constexpr const char* k_states[] = {"very well", "sleepy today", "a little hungry", "happy", "outside"};
        say(a, cat("How is your ", b.pet_kind, "?"));
        const char* state = pick(k_states);
        say(b, cat(b.pet_name, " is ", state, ", thank you."));
    }

    template <class Say>
    void dialogue_where(const Person& a, const Person& b, Say& say) {
        const Noun& noun = pick(k_objects);
        const bool plural = chance(0.4);
        const std::string thing = cat(pick(k_adjectives), " ", plural ? noun.many : noun.one);
        const char* spot = pick(k_spots);
        say(a, cat(plural ? "Where are my " : "Where is my ", thing, "?"));
        say(b, cat(plural ? "They are " : "It is ", spot, "."));
        say(a, "Thank you!");
    }

    template <class Say>
    void dialogue_job(const Person& a, const Person& b, Say& say) {
        say(a, cat("What do you do, ", b.name, "?"));
        say(b, cat("I am ", starts_with_vowel(b.job) ? "an " : "a ", b.job, ". I ", b.activity_base, "."));
    }

    template <class Say>
    void dialogue_how_many(const Person& a, const Person& b, Say& say) {
        const Noun& noun = pick(k_objects);
        const char* container = pick(k_containers);
        const int count = between(1, 9);
        say(a, cat("How many ", noun.many, " are in the ", container, "?"));
        say(b, cat(count == 1 ? "There is " : "There are ", numbered(count, noun), " in the ", container, "."));
    }

    // ---- counting: sums that add up, counts that match the list read aloud

    std::string counting() {
        switch (below(5)) {
            case 0:
                return counting_aloud();
            case 1:
                return counting_add();
            case 2:
                return counting_take();
            case 3:
                return counting_digits();
            default:
                return counting_race();
        }
    }

    std::string counting_aloud() {
        const Person& a = person();
        const Noun& noun = pick(k_objects);
        const int count = between(2, 10);
        std::vector<std::string> numbers;
        for (int i = 1; i <= count; ++i) numbers.push_back(k_number_words[i]);
        std::string spoken;
        for (size_t i = 0; i < numbers.size(); ++i) spoken += cat(i ? ", " : "", numbers[i]);
        const char* container = pick(k_containers);
        return cat(a.name, " counted the ", noun.many, " in the ", container, ": ", spoken, ". There were ",
                   numbered(count, noun), ".");
    }

    std::string counting_add() {
        const Person& a = person();
        const Person& b = other_than(a);
        const Noun& noun = pick(k_objects);
        const int first = between(1, 8);
        const int more = between(1, 12 - first);
        return sentences({
            cat(a.name, " had ", numbered(first, noun), "."),
            cat(b.name, " gave ", him(a), " ", k_number_words[more], " more."),
            cat("Now ", a.name, " has ", numbered(first + more, noun), "."),
        });
    }

    std::string counting_take() {
        const Person& a = person();
        const Person& b = other_than(a);
        const Noun& noun = pick(k_objects);
        const int had = between(2, 12);
        const int given = between(1, had - 1);
        std::vector<std::string> out = {
            cat(a.name, " had ", numbered(had, noun), "."),
            capitalized(cat(he(a), " gave ", k_number_words[given], " to ", b.name, ".")),
            cat("Now ", he(a), " has ", numbered(had - given, noun), "."),
        };
        if (chance(0.5))
            out.back() = cat("Now ", he(a), " has ", numbered(had - given, noun), " and ", b.name, " has ",
                             numbered(given, noun), ".");
        return sentences(out);
    }

    std::string counting_digits() {
        const Person& a = person();
        const Place& place = pick(k_places);
        const int count = between(5, 20);
        std::string spoken;
        for (int i = 1; i <= count; ++i) spoken += cat(i > 1 ? ", " : "", std::to_string(i));
        return cat(a.name, " counted the steps to ", place.name, ": ", spoken, ". There were ", std::to_string(count),
                   " steps.");
    }

    std::string counting_race() {
        const size_t runners = size_t(between(3, 5));
        const std::vector<size_t> order = distinct(runners, k_people_count);
        const Place& goal = pick(k_places);
        std::vector<std::string> places;
        for (size_t i = 0; i < runners; ++i) places.push_back(cat(k_people[order[i]].name, " came ", k_ordinals[i]));
        return cat("The children ran a race to ", goal.name, ". ", joined(places), ".");
    }

    // ---- lists: shopping, what a container holds (was/were agrees with the first item), likes

    std::string list() {
        switch (below(4)) {
            case 0:
                return list_shopping();
            case 1:
                return list_contents();
            case 2:
                return list_week();
            default:
                return list_likes();
        }
    }

    // Consecutive days from a random one: the order of the week is there to be learnt.
    std::string list_week() {
        const Person& a = person();
        const size_t first = below(std::size(k_days));
        const int days = between(3, 5);
        std::vector<std::string> out = {cat(a.name, " made a plan for the week.")};
        for (int d = 0; d < days; ++d) {
            const Place& place = pick(k_places);
            out.push_back(cat("On ", k_days[(first + size_t(d)) % std::size(k_days)], ", ", he(a), " will go to ",
                              place.name, " to ", place.errand, "."));
        }
        return sentences(out);
    }

    std::string list_shopping() {
        const Person& a = person();
        std::vector<std::string> items;
        const size_t item_count = size_t(between(3, 6));
        for (size_t i : distinct(item_count, std::size(k_foods))) items.push_back(k_foods[i]);
        const char* shop = chance(0.5) ? "the market" : "the bakery";
        return sentences({
            cat(a.name, " wrote a shopping list: ", joined(items), "."),
            capitalized(cat(he(a), " took it to ", shop, " and bought everything on it.")),
        });
    }

    std::string list_contents() {
        const Person& a = person();
        std::vector<std::string> items;
        int first_count = 0;
        const size_t item_count = size_t(between(2, 4));
        for (size_t i : distinct(item_count, std::size(k_objects))) {
            const int count = between(1, 4);
            const char* adjective = chance(0.4) ? pick(k_adjectives) : nullptr;
            if (items.empty()) first_count = count;
            items.push_back(counted(count, k_objects[i], adjective));
        }
        const char* container = pick(k_containers);
        return cat("In ", a.name, "'s ", container, first_count == 1 ? " there was " : " there were ", joined(items),
                   ".");
    }

    std::string list_likes() {
        const Person& a = person();
        const Person& b = other_than(a);
        // Four distinct foods, so that three remain once a's favourite is left out.
        std::vector<const char*> foods;
        for (size_t i : distinct(4, std::size(k_foods)))
            if (std::string_view(k_foods[i]) != a.food) foods.push_back(k_foods[i]);
        if (chance(0.5)) {
            return sentences({
                cat(a.name, " likes ", a.food, ", ", foods[0], " and ", foods[1], "."),
                capitalized(cat(he(a), " does not like ", foods[2], ".")),
            });
        }
        return sentences({
            cat(a.name, " and ", b.name, " both like ", foods[0], "."),
            cat(a.name, "'s favourite food is ", a.food, ", and ", b.name, "'s favourite food is ", b.food, "."),
        });
    }

    // ---- descriptions: the fixed facts about a person or a place

    std::string person_description() {
        const Person& a = person();
        std::vector<std::string> out = {
            cat(a.name, " is ", starts_with_vowel(a.job) ? "an " : "a ", a.job, "."),
            capitalized(cat(he(a), " lives ", a.home, ".")),
        };
        if (chance(0.7)) out.push_back(capitalized(cat(he(a), " has a ", a.pet_kind, " called ", a.pet_name, ".")));
        constexpr const char* k_every[] = {"Every day", "Every morning", "Most days", "Every week"};
        const char* every = pick(k_every);
        out.push_back(cat(every, ", ", he(a), " ", a.activity_3rd, "."));
        if (chance(0.5)) out.push_back(cat(capitalized(his(a)), " favourite food is ", a.food, "."));
        return sentences(out);
    }

    std::string place_description() {
        const Place& place = pick(k_places);
        const Person& a = person();
        std::vector<std::string> out(std::begin(place.facts), std::end(place.facts));
        if (chance(0.6)) out.push_back(cat(a.name, " often goes there to ", place.errand, "."));
        return sentences(out);
    }

    Rng m_rng;
};

}  // namespace

std::string generate_corpus(uint64_t seed, size_t target_bytes) { return CorpusWriter(seed).write(target_bytes); }

std::string generate_default_corpus() { return generate_corpus(k_default_corpus_seed, k_default_corpus_target_bytes); }

}  // namespace us
