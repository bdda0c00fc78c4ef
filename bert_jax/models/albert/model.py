"""ALBERT (Lan et al. 2020): factorised embeddings, cross-layer sharing, MLM head in E, SOP.

Built from the shared blocks: the word/position/type tables are `Embeddings` of width
``embedding_size`` (E), projected to ``hidden_size`` (H) by ``embedding_projection``; the layers
are BERT's post-LN `EncoderBlock`s, shared across depth as ``model.albert.layer_sharing`` says:

* ``all``: one block's weights (``encoder/shared/layer/...``) applied ``num_layers`` times, so
  the parameter count does not grow with depth; under ``scan_layers`` the loop is an ``nn.scan``
  that broadcasts those weights (same parameter tree).
* ``none``: the ordinary `Encoder` (``encoder/layer_<i>/...``), every option of BERT included.
* ``attention`` / ``ffn``: the paper's partial sharing; the attention sublayer (projections and
  their LayerNorm) or the feed-forward sublayer (two dense layers and their LayerNorm) is stored
  once under ``encoder/attention`` / ``encoder/ffn``, the other per layer under
  ``encoder/attention_<i>`` / ``encoder/ffn_<i>``.

The masked-LM head projects H -> E before the tied word table (as Hugging Face's
``AlbertMLMHead``); the sentence-order head sits on the pooled output and is returned as
``nsp_logits``, the key the pretraining task reads for both NSP and SOP.
"""

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import names
from bert_jax.models import heads, layers, span_boundary
from bert_jax.models.blocks import AttentionSublayer, EncoderBlock, FeedForwardSublayer
from bert_jax.models.config import ModelConfig
from bert_jax.models.dropout import Dropout
from bert_jax.models.embeddings import Embeddings, position_ids
from bert_jax.models.encoder import Encoder, remat
from bert_jax.models.heads import MaskedLmHead


class _SharedLayer(nn.Module):
  """The one block of ``layer_sharing="all"``, in `nn.scan`'s (carry, xs) form."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    block = remat(EncoderBlock, self.config)(self.config, self.deterministic, name="layer")
    return block(x_BLD, segment_ids_BL), None


class SharedEncoder(nn.Module):
  """``num_layers`` applications of one `EncoderBlock` (ALBERT's all-shared stack)."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config = self.config
    if config.scan_layers:
      scanned = nn.scan(
        _SharedLayer,
        variable_broadcast="params",
        split_rngs={"params": False, "dropout": True, "hashing": True},
        in_axes=nn.broadcast,
        length=config.num_layers,
      )
      return scanned(config, self.deterministic, name="shared")(x_BLD, segment_ids_BL)[0]
    shared = _SharedLayer(config, self.deterministic, name="shared")
    for _ in range(config.num_layers):
      x_BLD, _ = shared(x_BLD, segment_ids_BL)
    return x_BLD


class PartlySharedEncoder(nn.Module):
  """ALBERT's ``attention`` or ``ffn`` sharing: one sublayer stored once, the other per layer."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, x_BLD, segment_ids_BL):
    config, deterministic = self.config, self.deterministic
    attention_class = remat(AttentionSublayer, config)
    ffn_class = remat(FeedForwardSublayer, config)
    share_attention = config.albert.layer_sharing == "attention"
    shared_class = attention_class if share_attention else ffn_class
    shared = shared_class(config, deterministic, name=config.albert.layer_sharing)
    for i in range(config.num_layers):
      if share_attention:
        attention, ffn = shared, ffn_class(config, deterministic, name=f"ffn_{i}")
      else:
        attention, ffn = attention_class(config, deterministic, name=f"attention_{i}"), shared
      x_BLD = ffn(attention(x_BLD, segment_ids_BL))
    return x_BLD


_ENCODERS = {
  "all": SharedEncoder,
  "attention": PartlySharedEncoder,
  "ffn": PartlySharedEncoder,
  "none": Encoder,
}


class AlbertEncoder(nn.Module):
  """Embeddings of width E + projection to H + shared layers + pooler; the family's trunk.

  Called like `BertEncoder` on (ids, token types, mask); returns (sequence [B, L, H],
  pooled [B, H]) in the compute dtype.
  """

  config: ModelConfig
  deterministic: bool = True

  def setup(self):
    config = self.config
    self.embeddings = Embeddings(config, self.deterministic, name="embeddings")
    self.embedding_projection = layers.dense(
      config, config.hidden_size, (names.MLP, names.EMBED), "embedding_projection"
    )
    self.encoder = _ENCODERS[config.albert.layer_sharing](
      config, self.deterministic, name="encoder"
    )
    self.pooler = layers.dense(config, config.hidden_size, (names.EMBED, names.MLP), "pooler")

  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL):
    """See `BertEncoder.__call__`; the mask's positive values are document ids."""
    position_ids_BL = position_ids(self.config, input_ids_BL)
    x_BLE = self.embeddings(input_ids_BL, token_type_ids_BL, position_ids_BL)
    x_BLD = self.encoder(self.embedding_projection(x_BLE), input_mask_BL)
    pooled_BD = jnp.tanh(self.pooler(x_BLD[:, 0]))
    return x_BLD, pooled_BD

  def attend(self, x_BPE):
    return self.embeddings.attend(x_BPE)


class AlbertForPreTraining(nn.Module):
  """ALBERT with the masked-LM head (in E, at the masked positions) and the SOP head."""

  config: ModelConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, input_ids_BL, token_type_ids_BL, input_mask_BL, masked_lm_positions_BP=None):
    """Returns float32 ``mlm_logits`` [B, P, V] and sentence-order ``nsp_logits`` [B, 2].

    Arguments as `BertForPreTraining`; with ``model.span_boundary.enabled`` also ``sbo_logits``.
    """
    config = self.config
    albert = AlbertEncoder(config, self.deterministic, name="bert")
    x_BLD, pooled_BD = albert(input_ids_BL, token_type_ids_BL, input_mask_BL)
    x_BPD = heads.at_positions(x_BLD, masked_lm_positions_BP)
    head = MaskedLmHead(config, width=config.embedding_width, name="mlm_head")
    mlm_logits_BPV = head(x_BPD, albert.attend)
    pooled_BD = Dropout(config.hidden_dropout_rate)(pooled_BD, deterministic=self.deterministic)
    sop_logits_B2 = layers.dense(config, 2, (names.MLP, names.CLASSES), "sop_head")(pooled_BD)
    outputs = {"mlm_logits": mlm_logits_BPV, "nsp_logits": sop_logits_B2.astype(jnp.float32)}
    return span_boundary.add_logits(
      config, outputs, x_BLD, masked_lm_positions_BP, albert.attend, config.embedding_width
    )
