// The four linear layers of a block, named as in the checkpoint, for the spans of their GEMMs (forward, input
// gradient, weight gradient). Shared by the network code (gpt.cpp) and the split backward (gpt_weight_backward.cpp).
#pragma once

namespace us {

enum Linear { kQkv, kAttnProj, kFc, kFcProj, kLinearCount };
inline constexpr const char* kLinearNames[kLinearCount][3] = {
    {"attn.c_attn", "attn.c_attn dX", "attn.c_attn dW"},
    {"attn.c_proj", "attn.c_proj dX", "attn.c_proj dW"},
    {"mlp.c_fc", "mlp.c_fc dX", "mlp.c_fc dW"},
    {"mlp.c_proj", "mlp.c_proj dX", "mlp.c_proj dW"},
};

}  // namespace us
