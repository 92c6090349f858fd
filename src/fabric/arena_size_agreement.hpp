// Do the ranks ask for the same arena size? The arena is symmetric: the
// collectives' scratch sits at the top of every rank's arena, at an offset
// computed from its own size, and peers write there at theirs. Ranks that
// ask for different sizes would write each other's scratch in the wrong
// places, so a fabric compares the sizes when it starts (the host fabric in
// its shared world, the CUDA fabric over its bootstrap) and every rank
// refuses alike, naming the ranks of each size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tide::fabric {

// "" when every rank's size (everyRanks[r], as a gather returns them) is the
// same; else the message every rank raises. `who` names this fabric and rank.
std::string arenaSizeDisagreement(const std::string& who, const std::vector<uint64_t>& everyRanks);

}  // namespace tide::fabric
