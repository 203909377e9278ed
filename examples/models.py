"""Example models for cleave, in plain PyTorch.

Every class takes its configuration as keyword arguments plus `device`, which is passed to
every layer that creates parameters or buffers: with device="meta" a model of any size is
built without allocating parameter data, so its TorchScript graph can be exported in seconds.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _init_gpt_style(module: nn.Module) -> None:
    """GPT-2/BERT initialization (N(0, 0.02), zero biases): keeps logits of random models in a
    sane range so end-to-end comparisons are not dominated by huge values."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)


class MLP(nn.Module):
    def __init__(self, in_features=64, hidden=128, out_features=10, dropout=0.1, device=None):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden, device=device)
        self.fc2 = nn.Linear(hidden, hidden, device=device)
        self.fc3 = nn.Linear(hidden, out_features, device=device)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.drop(F.gelu(self.fc2(x)))
        return self.fc3(x)


class DeepMLP(nn.Module):
    """Equal Linear + ReLU blocks between an input and an output layer: a model whose training
    state is many times one layer's and whose activations are small (spilling's test case)."""

    def __init__(self, in_features=64, hidden=256, depth=16, out_features=10, device=None):
        super().__init__()
        self.inp = nn.Linear(in_features, hidden, device=device)
        self.blocks = nn.ModuleList([nn.Linear(hidden, hidden, device=device)
                                     for _ in range(depth)])
        self.head = nn.Linear(hidden, out_features, device=device)

    def forward(self, x):
        x = F.relu(self.inp(x))
        for block in self.blocks:
            x = F.relu(block(x))
        return self.head(x)


# --- GPT (nanoGPT / GPT-2 / Megatron GPT) -------------------------------------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, block_size, dropout, mask_in_forward=False, device=None):
        super().__init__()
        assert d_model % n_head == 0, "d_model must be divisible by n_head"
        self.mask_in_forward = mask_in_forward
        self.n_head = n_head
        self.d_model = d_model
        self.scale = 1.0 / math.sqrt(d_model // n_head)  # a constant: no size arithmetic traced
        self.qkv = nn.Linear(d_model, 3 * d_model, device=device)
        self.proj = nn.Linear(d_model, d_model, device=device)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        if not mask_in_forward:
            # nanoGPT's causal mask: a (1, 1, block, block) lower-triangular buffer, sliced per call.
            self.register_buffer(
                "bias",
                torch.tril(torch.ones(block_size, block_size, device=device)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(self.d_model, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        if self.mask_in_forward:
            # The common style (HF GPT-2, many others): the causal mask and its fill value are
            # built in forward on every call rather than registered once as a buffer.
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            fill = torch.full([], torch.finfo(att.dtype).min, dtype=att.dtype, device=x.device)
            att = torch.where(causal, att, fill)
        else:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class GPTMLP(nn.Module):
    def __init__(self, d_model, dropout, device=None):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model, device=device)
        self.proj = nn.Linear(4 * d_model, d_model, device=device)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.proj(F.gelu(self.fc(x))))


class GPTBlock(nn.Module):
    def __init__(self, d_model, n_head, block_size, dropout, mask_in_forward=False, device=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model, device=device)
        self.attn = CausalSelfAttention(d_model, n_head, block_size, dropout, mask_in_forward,
                                        device=device)
        self.ln_2 = nn.LayerNorm(d_model, device=device)
        self.mlp = GPTMLP(d_model, dropout, device=device)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=512, block_size=64, n_layer=4, n_head=4, d_model=128,
                 dropout=0.1, mask_in_forward=False, device=None):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, d_model, device=device)
        self.pos_emb = nn.Embedding(block_size, d_model, device=device)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [GPTBlock(d_model, n_head, block_size, dropout, mask_in_forward, device=device)
             for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model, device=device)
        self.head = nn.Linear(d_model, vocab_size, bias=False, device=device)
        _init_gpt_style(self)
        # Tied input/output embedding, as in GPT-2 and Megatron (tied after init so both share it).
        self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


# --- BERT ---------------------------------------------------------------------------------------

class BertSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout, device=None):
        super().__init__()
        assert d_model % n_head == 0, "d_model must be divisible by n_head"
        self.n_head = n_head
        self.head_dim = d_model // n_head
        self.q = nn.Linear(d_model, d_model, device=device)
        self.k = nn.Linear(d_model, d_model, device=device)
        self.v = nn.Linear(d_model, d_model, device=device)
        self.out = nn.Linear(d_model, d_model, device=device)
        self.drop = nn.Dropout(dropout)

    def _heads(self, x, B: int, T: int):
        return x.view(B, T, self.n_head, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x):
        B, T, C = x.size()
        q = self._heads(self.q(x), B, T)
        k = self._heads(self.k(x), B, T)
        v = self._heads(self.v(x), B, T)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = self.drop(F.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        return self.out(ctx)


class BertLayer(nn.Module):
    def __init__(self, d_model, n_head, d_ff, dropout, eps, device=None):
        super().__init__()
        self.attn = BertSelfAttention(d_model, n_head, dropout, device=device)
        self.ln_1 = nn.LayerNorm(d_model, eps=eps, device=device)
        self.fc = nn.Linear(d_model, d_ff, device=device)
        self.proj = nn.Linear(d_ff, d_model, device=device)
        self.ln_2 = nn.LayerNorm(d_model, eps=eps, device=device)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        # Post-LN residuals, as in the original BERT.
        x = self.ln_1(x + self.drop(self.attn(x)))
        return self.ln_2(x + self.drop(self.proj(F.gelu(self.fc(x)))))


class BertLike(nn.Module):
    def __init__(self, vocab_size=512, max_position=64, type_vocab_size=2, n_layer=4, n_head=4,
                 d_model=128, d_ff=512, dropout=0.1, eps=1e-12, device=None):
        super().__init__()
        self.word_emb = nn.Embedding(vocab_size, d_model, device=device)
        self.pos_emb = nn.Embedding(max_position, d_model, device=device)
        self.type_emb = nn.Embedding(type_vocab_size, d_model, device=device)
        self.emb_ln = nn.LayerNorm(d_model, eps=eps, device=device)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            [BertLayer(d_model, n_head, d_ff, dropout, eps, device=device) for _ in range(n_layer)])
        self.pooler = nn.Linear(d_model, d_model, device=device)
        _init_gpt_style(self)

    def forward(self, input_ids):
        B, T = input_ids.size()
        pos = torch.arange(0, T, dtype=torch.long, device=input_ids.device)
        token_type = torch.zeros_like(input_ids)  # single-segment input
        x = self.word_emb(input_ids) + self.pos_emb(pos) + self.type_emb(token_type)
        x = self.drop(self.emb_ln(x))
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


# --- ViT ----------------------------------------------------------------------------------------

class ViTAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout, device=None):
        super().__init__()
        assert d_model % n_head == 0, "d_model must be divisible by n_head"
        self.n_head = n_head
        self.head_dim = d_model // n_head
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(d_model, 3 * d_model, device=device)
        self.proj = nn.Linear(d_model, d_model, device=device)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        # timm-style attention: one reshape/permute, then q, k, v by indexing (select ops).
        B, T, C = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = self.drop(att.softmax(dim=-1))
        x = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.drop(self.proj(x))


class ViTBlock(nn.Module):
    def __init__(self, d_model, n_head, mlp_ratio, dropout, device=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model, eps=1e-6, device=device)
        self.attn = ViTAttention(d_model, n_head, dropout, device=device)
        self.ln_2 = nn.LayerNorm(d_model, eps=1e-6, device=device)
        self.fc = nn.Linear(d_model, mlp_ratio * d_model, device=device)
        self.proj = nn.Linear(mlp_ratio * d_model, d_model, device=device)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln_2(x)))))


class ViTLike(nn.Module):
    def __init__(self, image_size=64, patch_size=8, in_chans=3, n_classes=10, n_layer=4, n_head=4,
                 d_model=128, mlp_ratio=4, dropout=0.1, device=None):
        super().__init__()
        assert image_size % patch_size == 0, "image_size must be a multiple of patch_size"
        n_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(in_chans, d_model, kernel_size=patch_size, stride=patch_size,
                                     device=device)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model, device=device))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_patches + 1, d_model, device=device))
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [ViTBlock(d_model, n_head, mlp_ratio, dropout, device=device) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model, eps=1e-6, device=device)
        self.head = nn.Linear(d_model, n_classes, device=device)
        _init_gpt_style(self)
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.pos_embed, std=0.02)

    def forward(self, x):
        B = x.shape[0]
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, n_patches, D)
        x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)
        x = self.drop(x + self.pos_embed)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x)[:, 0])


# --- LLaMA --------------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate_half(x, half: int):
    x1 = x[..., :half]
    x2 = x[..., half:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d_model, n_head, device=None):
        super().__init__()
        assert d_model % n_head == 0, "d_model must be divisible by n_head"
        self.n_head = n_head
        self.head_dim = d_model // n_head
        self.wq = nn.Linear(d_model, d_model, bias=False, device=device)
        self.wk = nn.Linear(d_model, d_model, bias=False, device=device)
        self.wv = nn.Linear(d_model, d_model, bias=False, device=device)
        self.wo = nn.Linear(d_model, d_model, bias=False, device=device)

    def forward(self, x, cos, sin):
        B, T, C = x.size()
        q = self.wq(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        # Rotary embedding; cos/sin are (T, head_dim) and broadcast over batch and heads.
        half = self.head_dim // 2
        q = q * cos + _rotate_half(q, half) * sin
        k = k * cos + _rotate_half(k, half) * sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = torch.tril(torch.ones(T, T, device=x.device))
        att = F.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.wo(y)


class LlamaMLP(nn.Module):
    def __init__(self, d_model, hidden, device=None):
        super().__init__()
        self.w1 = nn.Linear(d_model, hidden, bias=False, device=device)
        self.w2 = nn.Linear(hidden, d_model, bias=False, device=device)
        self.w3 = nn.Linear(d_model, hidden, bias=False, device=device)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, d_model, n_head, hidden, eps, device=None):
        super().__init__()
        self.attn_norm = RMSNorm(d_model, eps, device=device)
        self.attn = LlamaAttention(d_model, n_head, device=device)
        self.ffn_norm = RMSNorm(d_model, eps, device=device)
        self.mlp = LlamaMLP(d_model, hidden, device=device)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.ffn_norm(x))


class LlamaLike(nn.Module):
    def __init__(self, vocab_size=512, max_seq=64, n_layer=4, n_head=4, d_model=128, hidden=352,
                 eps=1e-5, rope_theta=10000.0, device=None):
        super().__init__()
        head_dim = d_model // n_head
        self.tok_emb = nn.Embedding(vocab_size, d_model, device=device)
        self.blocks = nn.ModuleList(
            [LlamaBlock(d_model, n_head, hidden, eps, device=device) for _ in range(n_layer)])
        self.norm = RMSNorm(d_model, eps, device=device)
        self.head = nn.Linear(d_model, vocab_size, bias=False, device=device)
        _init_gpt_style(self)
        # Rotary tables, shared by all layers: (max_seq, head_dim), halves duplicated as in HF LLaMA.
        inv_freq = 1.0 / (rope_theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
        freqs = torch.outer(torch.arange(max_seq, device=device).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("rope_cos", emb.cos())
        self.register_buffer("rope_sin", emb.sin())

    def forward(self, idx):
        T = idx.size(1)
        cos = self.rope_cos[:T]
        sin = self.rope_sin[:T]
        x = self.tok_emb(idx)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))


# --- Training heads ------------------------------------------------------------------------------

class BertClassifier(nn.Module):
    """BertLike with a sequence-classification head on its pooled output: logits [B, n_classes]."""

    def __init__(self, n_classes=4, device=None, **bert):
        super().__init__()
        self.bert = BertLike(device=device, **bert)
        self.classifier = nn.Linear(self.bert.pooler.out_features, n_classes, device=device)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, input_ids):
        _, pooled = self.bert(input_ids)
        return self.classifier(pooled)


class WithLoss(nn.Module):
    """A model of one input that computes its own training loss: forward(x, labels) returns
    F.cross_entropy over the last dim of the wrapped model's output (`kind` "cross_entropy",
    labels: class indices of the output's shape without its last dim) or F.mse_loss (`kind`
    "mse", labels of the output's shape), mean reduction, as a training script would."""

    def __init__(self, model, kind):
        super().__init__()
        assert kind in ("cross_entropy", "mse"), kind
        self.model = model
        self.kind = kind

    def forward(self, x, labels):
        out = self.model(x)
        if self.kind == "mse":
            return F.mse_loss(out, labels)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), labels.reshape(-1))


# --- Importer test cases ------------------------------------------------------------------------

class UnsupportedOps(nn.Module):
    """Supported ops around ops a compiler is unlikely to support, each used a known number of
    times (linalg_qr x2, linalg_eigvalsh x1, grid_sampler x1), to test the importer's error
    report."""

    def __init__(self, in_features=16, hidden=32, k=8, out_features=4, device=None):
        super().__init__()
        self.k = k
        self.fc1 = nn.Linear(in_features, hidden, device=device)
        self.fc2 = nn.Linear(hidden, hidden, device=device)
        self.fc3 = nn.Linear(k, out_features, device=device)

    def forward(self, x):
        batch = x.shape[0]  # shapes from the input: the importer folds them
        h = torch.relu(self.fc1(x))
        _, r = torch.linalg.qr(h.reshape(batch, 4, -1))
        h = self.fc2(r.reshape(batch, -1))
        q, r = torch.linalg.qr(h.reshape(batch, -1, 4))
        s = torch.linalg.eigvalsh(r @ r.transpose(1, 2))
        grid = torch.tanh(q[:, : self.k, :2]).unsqueeze(2)
        h = F.grid_sample(q.unsqueeze(1), grid, align_corners=False).flatten(1)
        return self.fc3(h * s.mean(1, keepdim=True))


class ScriptedMLP(nn.Module):
    """For torch.jit.script: control flow the importer can resolve statically (a branch on the
    input rank, a ModuleList loop unrolled by TorchScript, a constant-trip-count prim::Loop over a
    shared layer, and a branch on a Final bool)."""

    use_residual: torch.jit.Final[bool]
    n_shared: torch.jit.Final[int]

    def __init__(self, in_features=16, d_model=32, n_layers=3, n_shared=2, use_residual=True,
                 device=None):
        super().__init__()
        self.inp = nn.Linear(in_features, d_model, device=device)
        self.layers = nn.ModuleList([nn.Linear(d_model, d_model, device=device) for _ in range(n_layers)])
        self.shared = nn.Linear(d_model, d_model, device=device)
        self.use_residual = use_residual
        self.n_shared = n_shared

    def forward(self, x):
        if x.dim() == 3:
            x = x.reshape(-1, x.size(-1))  # (B, S, F) -> (B*S, F)
        h = self.inp(x)
        for layer in self.layers:
            r = torch.relu(layer(h))
            if self.use_residual:
                h = h + r
            else:
                h = r
        for _ in range(self.n_shared):
            h = torch.relu(self.shared(h))
        return h


class DataDependentIf(nn.Module):
    """For torch.jit.script: a branch on tensor values, which a static importer must reject."""

    def __init__(self, device=None):
        super().__init__()  # no parameters; `device` keeps the constructors uniform

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        else:
            return x - 1

