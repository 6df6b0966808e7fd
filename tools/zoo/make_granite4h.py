"""Granite-4.0-H (granite-4.0-h-tiny layout, GraniteMoeHybridForCausalLM): Mamba2 mixers (d_head 64,
d_state 128, 1 group, expand 2, conv 4 with bias, no proj bias) with a NoPE GQA attention layer
(position_embedding_type "nope"), every layer an MoE FFN (softmax top-k over SwiGLU experts) plus a
shared SwiGLU expert, muP multipliers embedding 12, residual 0.22, attention 0.0078125, logits 6,
rms eps 1e-5, tied embeddings. Shrunk: 4 layers [M, M, M, A], n_embd 256, attention 2 q / 1 kv x 128
(tiny is 12:4 x 128), mamba 8 heads x 64, 4 experts x 128 with 2 used (tiny: 64 x 512, 6 used), shared 256."""
import torch, zoo
from transformers import GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM
NAME, SEED = "granite4h-tiny", 1004
d = zoo.HF / NAME
n_vocab, eos = zoo.build_tokenizer(d)
types = ["linear_attention"] * 3 + ["full_attention"]
cfg = GraniteMoeHybridConfig(
    vocab_size=n_vocab, hidden_size=256, intermediate_size=128, num_hidden_layers=4,
    num_attention_heads=2, num_key_value_heads=1, hidden_act="silu", max_position_embeddings=131072,
    rms_norm_eps=1e-5, tie_word_embeddings=True, attention_bias=False,
    embedding_multiplier=12.0, logits_scaling=6.0, residual_multiplier=0.22, attention_multiplier=0.0078125,
    num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=256, position_embedding_type="nope",
    layer_types=types, mamba_n_heads=8, mamba_n_groups=1, mamba_d_state=128, mamba_d_head=64, mamba_d_conv=4,
    mamba_expand=2, mamba_chunk_size=256, mamba_conv_bias=True, mamba_proj_bias=False,
    pad_token_id=eos, bos_token_id=eos, eos_token_id=eos)
torch.manual_seed(SEED)
m = GraniteMoeHybridForCausalLM(cfg).float()
zoo.reinit(m, SEED)
def edit(c):
    # published granite-4.0-h configs spell the layer types "mamba"/"attention", which is what
    # llama.cpp's converter looks for; transformers 5 re-spells them linear_attention/full_attention
    c["layer_types"] = ["mamba" if t == "linear_attention" else "attention" for t in types]
    c.pop("layers_block_type", None)
zoo.save(m, d, "GraniteMoeHybridForCausalLM", cfg_edit=edit)
zoo.pipeline(NAME, d, "f16")
