"""Model definitions: transformers' Qwen3_5ForCausalLM for the trunk, plus the MTP block transformers lacks.

Configs follow the layout of the small published Qwen3.5 models (Qwen3.5-0.8B's text config), shrunk:
3 Gated DeltaNet layers then 1 gated full-attention layer, repeating; GDN key heads : value heads = 1:2;
attention with output gate, q/k norms, partial rotary (1/4 of head_dim) with interleaved M-RoPE;
SwiGLU FFN; tied embeddings.
"""
import copy
import torch
from torch import nn
import torch.nn.functional as F
from transformers import Qwen3_5TextConfig, Qwen3_5ForCausalLM
from transformers.masking_utils import create_causal_mask
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm


def qwen35_config(vocab: int, eot: int, n_embd: int, n_layer: int, n_ff: int, gdn_k_heads: int,
                  attn_heads: int, attn_kv_heads: int, head_dim: int = 64, mtp: bool = True) -> Qwen3_5TextConfig:
    if n_layer % 4:
        raise ValueError(f"n_layer {n_layer}: the 3:1 GDN:attention pattern needs a multiple of 4")
    return Qwen3_5TextConfig(
        vocab_size=vocab, hidden_size=n_embd, intermediate_size=n_ff, num_hidden_layers=n_layer,
        num_attention_heads=attn_heads, num_key_value_heads=attn_kv_heads, head_dim=head_dim, hidden_act="silu",
        max_position_embeddings=262144, rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [3, 3, 2], "mrope_interleaved": True},
        linear_conv_kernel_dim=4, linear_key_head_dim=head_dim, linear_value_head_dim=head_dim,
        linear_num_key_heads=gdn_k_heads, linear_num_value_heads=2 * gdn_k_heads,
        layer_types=(["linear_attention"] * 3 + ["full_attention"]) * (n_layer // 4),
        mtp_num_hidden_layers=1 if mtp else 0, mtp_use_dedicated_embeddings=False, attn_output_gate=True,
        bos_token_id=eot, eos_token_id=eot, pad_token_id=eot)


# name -> (n_embd, n_layer, n_ff, gdn_k_heads, attn_heads, attn_kv_heads, head_dim, mtp)
SIZES = {
    "target": (256, 8, 1024, 2, 4, 1, 64, True),
    "draft": (192, 4, 512, 1, 3, 1, 64, False),
    # For the committed reference-logits test: same code path, small enough to keep in the repository.
    "tiny": (64, 4, 128, 1, 2, 1, 32, True),
}


def make_config(size: str, vocab: int, eot: int) -> Qwen3_5TextConfig:
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; known: {', '.join(SIZES)}")
    *dims, mtp = SIZES[size]
    return qwen35_config(vocab, eot, *dims, mtp=mtp)


class MTPBlock(nn.Module):
    """One multi-token-prediction block as Qwen3-Next / Qwen3.5 checkpoints hold it under mtp.*
    (DeepSeek-V3's MTP module with Qwen's names): for position t,
        x = fc(concat(pre_fc_norm_embedding(embed(token[t+1])), pre_fc_norm_hidden(h[t])))
        x = layers.0(x)   one full-attention decoder layer of the trunk's kind, causal over the positions
        out = norm(x)     then the trunk's (shared) lm_head gives logits for token[t+2].
    h[t] is the trunk's last hidden state after its final norm, the same row its lm_head reads: that is what
    llama.cpp's qwen35 MTP graph (t_h_nextn) and rewind (forward_qwen35_mtp's hidden_in) are given.
    The embedding half comes first in the concat, as both of them build it."""

    def __init__(self, cfg: Qwen3_5TextConfig):
        super().__init__()
        c = copy.deepcopy(cfg)
        c.num_hidden_layers = 1
        c.layer_types = ["full_attention"]
        d = cfg.hidden_size
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.pre_fc_norm_embedding = Qwen3_5RMSNorm(d, eps=cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = Qwen3_5RMSNorm(d, eps=cfg.rms_norm_eps)
        self.layers = nn.ModuleList([Qwen3_5DecoderLayer(c, 0)])
        self.norm = Qwen3_5RMSNorm(d, eps=cfg.rms_norm_eps)
        self.layer_config = c

    def forward(self, next_embeds, hidden, position_embeddings, attention_mask):
        x = torch.cat([self.pre_fc_norm_embedding(next_embeds), self.pre_fc_norm_hidden(hidden)], dim=-1)
        x = self.fc(x)
        x = self.layers[0](x, position_embeddings=position_embeddings, attention_mask=attention_mask)
        return self.norm(x)


class Qwen35WithMTP(nn.Module):
    """The HF model plus an optional MTP block; loss = CE(next token) + mtp_weight * CE(token after next)."""

    def __init__(self, cfg: Qwen3_5TextConfig):
        super().__init__()
        self.lm = Qwen3_5ForCausalLM(cfg)
        self.mtp = MTPBlock(cfg) if cfg.mtp_num_hidden_layers else None
        if self.mtp is not None:
            self.mtp.apply(self.lm._init_weights)  # the trunk's init scheme, not torch's layer defaults

    def mtp_hidden(self, ids, hidden):
        """MTP block outputs for positions 0..T-2 of ids [B, T], from the trunk's final hidden states."""
        inner = self.lm.model
        e = inner.embed_tokens(ids[:, 1:])
        h = hidden[:, :-1]
        pos = torch.arange(e.shape[1], device=ids.device).view(1, 1, -1).expand(3, ids.shape[0], -1)
        pe = inner.rotary_emb(e, pos)
        mask = create_causal_mask(config=self.mtp.layer_config, inputs_embeds=e, attention_mask=None,
                                  cache=None, position_ids=pos[0])
        return self.mtp(e, h, pe, mask)

    def forward(self, ids):
        """(main logits [B,T,V], mtp logits [B,T-1,V] or None); row t of the MTP logits predicts ids[t+2]."""
        hidden = self.lm.model(input_ids=ids).last_hidden_state
        logits = self.lm.lm_head(hidden)
        mtp_logits = self.lm.lm_head(self.mtp_hidden(ids, hidden)) if self.mtp is not None else None
        return logits, mtp_logits

    def losses(self, ids):
        logits, mtp_logits = self(ids)
        v = logits.shape[-1]
        main = F.cross_entropy(logits[:, :-1].reshape(-1, v).float(), ids[:, 1:].reshape(-1))
        if mtp_logits is None:
            return main, None
        mtp = F.cross_entropy(mtp_logits[:, :-1].reshape(-1, v).float(), ids[:, 2:].reshape(-1))
        return main, mtp


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
