"""An encoder with ALBERT's two pre-training heads: masked-LM and a two-way sentence classifier (SOP or NSP).

The masked-LM head maps a hidden state H -> E (dense, GELU, layer norm) and scores the vocabulary with the
word-embedding table itself (V x E, tied, plus a bias), as ALBERT's does, so a factorized model predicts
through its small table. The sentence head reads the pooled [CLS] vector (the encoder's pooler).
"""

from __future__ import annotations

import torch
from torch import nn

from compress.models.encoder import Encoder
from compress.pretrain.masking import IGNORE


class PretrainingModel(nn.Module):
    def __init__(self, encoder: Encoder) -> None:
        super().__init__()
        config = encoder.config
        self.encoder = encoder
        self.mlm_dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.mlm_norm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.sentence = nn.Linear(config.hidden_size, 2)
        for linear in (self.mlm_dense, self.sentence):
            nn.init.normal_(linear.weight, std=config.initializer_range)
            nn.init.zeros_(linear.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor,
                mlm_labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Vocabulary logits at the masked positions only (M, V), in row-major order of ``mlm_labels !=
        IGNORE``, and the sentence head's logits (B, 2)."""
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        hidden = out.last_hidden_state[mlm_labels != IGNORE]
        x = self.mlm_norm(nn.functional.gelu(self.mlm_dense(hidden)))
        vocabulary = x @ self.encoder.embeddings.word_embeddings.weight.T + self.mlm_bias
        return vocabulary, self.sentence(out.pooled)
