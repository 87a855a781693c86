#!/usr/bin/python3
"""train's --model gpt in PyTorch: the module the README shows, and the
peer that train's GPT is checked and measured against.

    torch_gpt.py eval CHECKPOINT DATA_DIR
        load a train checkpoint with load_state_dict(strict=True) and print
        the validation split's loss as train computes it (JSON)
    mpirun -np 2 torch_gpt.py bench --data DIR [sizes] --batch-size 4 --threads 1 --steps 5 --warmup 1
        time training steps (DDP over gloo when launched with more than one
        rank): tokens/s, peak RSS per rank (JSON, rank 0)
    mpirun -np 2 torch_gpt.py train --init INIT.safetensors --data DIR [sizes and hyperparameters] --log-file F
        train from train's `train init` file as `train --model gpt` does:
        the same windows in the same order (train's sampler, below), AdamW
        with decay on matrices only, warm-up then cosine; writes train's
        JSON-lines log records (step, eval) so `train plot` draws both

The names and layouts are Hugging Face's GPT2LMHeadModel's (Conv1D weights
stored in x out, lm_head.weight tied to transformer.wte.weight), with the
embedding table padded as llm.c pads it. Ranks come from mpirun's
OMPI_COMM_WORLD_RANK/SIZE. safetensors and the shards are read with the
standard library (Debian 12 has no python3-safetensors). Needs Debian's
python3-torch (1.13).
"""
import argparse
import contextlib
import json
import math
import os
import resource
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Conv1D(nn.Module):
    """Hugging Face's Conv1D, GPT-2's linear map: x @ weight + bias, weight (in, out)."""

    def __init__(self, nin, nout):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(nin, nout))
        self.bias = nn.Parameter(torch.zeros(nout))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


class GPT2Attention(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        self.heads = heads
        self.c_attn = Conv1D(dim, 3 * dim)
        self.c_proj = Conv1D(dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(context, context)).view(1, 1, context, context), persistent=False)
        self.sdpa = False  # bench --sdpa: PyTorch's fused attention (flash on CUDA), as a PyTorch user would write it

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            return self.c_proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(B, T, C))
        att = (q @ k.transpose(-2, -1)) / (C // self.heads) ** 0.5
        att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class GPT2MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.c_fc = Conv1D(dim, 4 * dim)
        self.c_proj = Conv1D(4 * dim, dim)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-5)
        self.attn = GPT2Attention(dim, heads, context)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-5)
        self.mlp = GPT2MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """train --model gpt, named as Hugging Face's GPT2LMHeadModel: the
    embedding table has vocab_padded rows (llm.c's padding), the head is
    tied to it, and only the first vocab logits are computed."""

    def __init__(self, layers, heads, dim, context, vocab, vocab_padded):
        super().__init__()
        self.vocab = vocab
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_padded, dim),
            wpe=nn.Embedding(context, dim),
            h=nn.ModuleList([GPT2Block(dim, heads, context) for _ in range(layers)]),
            ln_f=nn.LayerNorm(dim, eps=1e-5)))
        self.lm_head = nn.Linear(dim, vocab_padded, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, idx):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in t.h:
            x = block(x)
        return F.linear(t.ln_f(x), self.lm_head.weight[: self.vocab])


DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n :]
    out = {}
    for name, info in header.items():
        lo, hi = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[lo:hi]), dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return out, meta


def read_shards(directory, split):
    """The tokens of directory's *_<split>_*.bin shards (llm.c's format: 256
    int32 of header, magic 20240520, version 1, count; then uint16 tokens),
    in name order, as one int64 tensor."""
    names = sorted(n for n in os.listdir(directory) if f"_{split}_" in n and n.endswith(".bin"))
    parts = []
    for n in names:
        with open(os.path.join(directory, n), "rb") as f:
            blob = f.read()
        magic, version, count = struct.unpack("<3i", blob[:12])
        assert magic == 20240520 and version == 1, (n, magic, version)
        parts.append(torch.frombuffer(bytearray(blob[1024 : 1024 + 2 * count]), dtype=torch.int16).to(torch.int64) & 0xFFFF)
    return torch.cat(parts)


def vocabulary(directory):
    try:
        with open(os.path.join(directory, "tokenizer.json")) as f:
            return json.load(f)["vocab"]
    except FileNotFoundError:
        return 50257


def windows(tokens, t):
    """train's windows: window k is tokens k*t .. k*t+t, inputs and the
    next token at each position (data.Windows)."""
    n = (len(tokens) - 1) // t
    idx = torch.arange(n).unsqueeze(1) * t + torch.arange(t + 1)
    w = tokens[idx]
    return w[:, :-1], w[:, 1:]


MASK64 = (1 << 64) - 1


class PCG:
    """Go's math/rand/v2 PCG (128-bit LCG, DXSM output), so that the data
    order here is train's (data.Permutation)."""

    MUL = (2549297995355413924 << 64) | 4865540595714422341
    INC = (6364136223846793005 << 64) | 1442695040888963407

    def __init__(self, seed1, seed2):
        self.state = (seed1 << 64) | seed2

    def uint64(self):
        self.state = (self.state * self.MUL + self.INC) & ((1 << 128) - 1)
        hi, lo = self.state >> 64, self.state & MASK64
        hi ^= hi >> 32
        hi = (hi * 0xDA942042E4DD58B5) & MASK64
        hi ^= hi >> 48
        return (hi * (lo | 1)) & MASK64


def permutation(n, seed, stream):
    """data.Permutation: Fisher-Yates driven by PCG(seed, stream), bounded
    draws by rejection."""
    p = list(range(n))
    rng = PCG(seed, stream)
    for i in range(n - 1, 0, -1):
        m = i + 1
        limit = (-m) % (1 << 64) % m
        while True:
            v = rng.uint64()
            if v >= limit:
                break
        j = v % m
        p[i], p[j] = p[j], p[i]
    return p


def build(args, vocab):
    padded = vocab if vocab < 1024 else (vocab + 127) // 128 * 128
    return GPT(args.layers, args.heads, args.dim, args.context, vocab, padded)


def evaluate(model, x, y, batch):
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for lo in range(0, len(x), batch):
            logits = model(x[lo : lo + batch])
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), y[lo : lo + batch].reshape(-1), reduction="sum").item()
            n += y[lo : lo + batch].numel()
    model.train()
    return total / n


def cmd_eval(args):
    tensors, meta = read_safetensors(args.checkpoint)
    cfg = json.loads(meta["model"])["gpt"]
    state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    model = GPT(cfg["layers"], cfg["heads"], cfg["dim"], cfg["context"], cfg["vocab"], cfg["vocab_padded"])
    model.load_state_dict(state, strict=True)
    model = model.double()
    x, y = windows(read_shards(args.data, "val"), cfg["context"])
    loss = evaluate(model, x, y, 16)
    print(json.dumps({"step": int(meta.get("step", 0)), "val_loss": loss, "perplexity": math.exp(loss)}))


def world():
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    if size > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ.get('TORCH_GPT_PORT', '29577')}", rank=rank, world_size=size)
    return rank, size


def optimizer(model, args):
    """AdamW with weight decay on the matrices and embeddings only
    (nanoGPT's groups: tensors of two or more dimensions), as train does."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    other = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)


def lr_at(step, args):
    """optim.Schedule's cosine at a whole number of global batches: the
    warm-up's (step+1)/W, then 0.5 (1 + cos(pi t)) to zero at
    --lr-decay-steps."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    t = min(1.0, (step - args.warmup_steps) / max(1, args.lr_decay_steps - args.warmup_steps))
    return args.lr * 0.5 * (1 + math.cos(math.pi * t))


def cmd_train(args):
    torch.set_num_threads(args.threads)
    rank, size = world()
    vocab = vocabulary(args.data)
    model = build(args, vocab)
    init, _ = read_safetensors(args.init)
    model.load_state_dict({k: v for k, v in init.items() if not k.startswith("optimizer.")}, strict=True)
    ddp = nn.parallel.DistributedDataParallel(model) if size > 1 else model
    opt = optimizer(model, args)
    x, y = windows(read_shards(args.data, "train"), args.context)
    vx, vy = windows(read_shards(args.data, "val"), args.context)
    vmine = list(range(rank, len(vx), size))
    g = args.batch_size * size
    spe = len(x) // g
    log = open(args.log_file, "w") if rank == 0 and args.log_file else None

    def record(r):
        if log:
            log.write(json.dumps(r) + "\n")
            log.flush()

    def val():
        s = torch.tensor([evaluate(model, vx[vmine], vy[vmine], args.batch_size) * len(vmine) * args.context, len(vmine) * args.context], dtype=torch.float64)
        if size > 1:
            dist.all_reduce(s)
        return (s[0] / s[1]).item()

    record({"type": "start", "step": 0, "model": f"pytorch {torch.__version__} gpt ({args.layers} layers, {args.heads} heads, dim {args.dim}, context {args.context})",
            "world_size": size, "global_batch": g})
    step, start, window_loss, window_n = 0, time.time(), 0.0, 0
    epoch = 0
    while step < args.max_steps:
        perm = permutation(len(x), args.seed, epoch)
        for k in range(spe):
            if step >= args.max_steps:
                break
            idx = [perm[(k * g) + i * size + rank] for i in range(args.batch_size)]
            for group in opt.param_groups:
                group["lr"] = lr_at(step, args)
            logits = ddp(x[idx])
            loss = F.cross_entropy(logits.reshape(-1, vocab), y[idx].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if args.clip_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
            opt.step()
            step += 1
            window_loss, window_n = window_loss + loss.item(), window_n + 1
            if step % args.log_every == 0:
                t = torch.tensor([window_loss / window_n])
                if size > 1:
                    dist.all_reduce(t)
                el = time.time() - start
                record({"type": "step", "epoch": epoch + 1, "step": step, "loss": t.item() / size, "lr": lr_at(step - 1, args),
                        "samples_per_second": window_n * g / el})
                if rank == 0:
                    print(f"step {step} loss {t.item() / size:.4f} {window_n * g * args.context / el:.0f} tokens/s", flush=True)
                window_loss, window_n, start = 0.0, 0, time.time()
            if step % args.eval_every == 0 or step == args.max_steps:
                v = val()
                record({"type": "eval", "epoch": epoch + 1, "step": step, "test_loss": v})
                if rank == 0:
                    print(f"step {step}: val loss {v:.4f} (perplexity {math.exp(v):.2f})", flush=True)
                start = time.time()
        epoch += 1


def cmd_bench(args):
    torch.set_num_threads(args.threads)
    rank, size = world()
    cuda = args.device == "cuda"
    if cuda and size > 1:
        sys.exit("bench --device cuda: one process (the comparison is one GPU)")
    dev = torch.device(args.device)
    vocab = vocabulary(args.data)
    torch.manual_seed(1)
    model = build(args, vocab).to(dev)
    for m in model.modules():
        if isinstance(m, GPT2Attention):
            m.sdpa = args.sdpa
    ddp = nn.parallel.DistributedDataParallel(model) if size > 1 else model
    if args.compile:
        ddp = torch.compile(ddp)
    opt = optimizer(model, args)
    x, y = windows(read_shards(args.data, "train"), args.context)
    x, y = x.to(dev), y.to(dev)
    g = args.batch_size * size
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if args.precision == "bf16" else contextlib.nullcontext()
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def steps(n, at):
        for k in range(at, at + n):
            idx = torch.tensor([(k * g + i * size + rank) % len(x) for i in range(args.batch_size)], device=dev)
            with amp:
                logits = ddp(x[idx])
                loss = F.cross_entropy(logits.reshape(-1, vocab).float(), y[idx].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    steps(args.warmup, 0)
    sync()
    if size > 1:
        dist.barrier()
    t0 = time.time()
    steps(args.steps, args.warmup)
    sync()
    if size > 1:
        dist.barrier()
    el = time.time() - t0
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    if size > 1:
        dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        r = {"ranks": size, "batch_per_rank": args.batch_size, "threads": args.threads, "steps": args.steps,
             "tokens_per_s": args.steps * g * args.context / el, "ms_per_step": 1e3 * el / args.steps,
             "peak_rss_mib": rss.item(), "parameters": sum(p.numel() for p in model.parameters()), "torch": torch.__version__,
             "device": args.device, "compile": args.compile, "precision": args.precision, "sdpa": args.sdpa}
        if cuda:
            r["peak_device_mib"] = torch.cuda.max_memory_allocated() / 2**20
        print(json.dumps(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("eval")
    e.add_argument("checkpoint")
    e.add_argument("data")
    for name in ("bench", "train"):
        p = sub.add_parser(name)
        p.add_argument("--data", required=True)
        p.add_argument("--layers", type=int, default=6)
        p.add_argument("--heads", type=int, default=6)
        p.add_argument("--dim", type=int, default=384)
        p.add_argument("--context", type=int, default=256)
        p.add_argument("--batch-size", type=int, default=4)
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--lr", type=float, default=6e-4)
        p.add_argument("--weight-decay", type=float, default=0.1)
        p.add_argument("--beta1", type=float, default=0.9)
        p.add_argument("--beta2", type=float, default=0.95)
        p.add_argument("--eps", type=float, default=1e-8)
    b = sub.choices["bench"]
    b.add_argument("--steps", type=int, default=5)
    b.add_argument("--warmup", type=int, default=1)
    b.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    b.add_argument("--compile", action="store_true", help="torch.compile the model")
    b.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16: autocast, fp32 master weights")
    b.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention (PyTorch >= 2.0)")
    t = sub.choices["train"]
    t.add_argument("--init", required=True)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--warmup-steps", type=int, default=0)
    t.add_argument("--lr-decay-steps", type=int, required=True)
    t.add_argument("--max-steps", type=int, required=True)
    t.add_argument("--clip-grad-norm", type=float, default=0)
    t.add_argument("--eval-every", type=int, default=100)
    t.add_argument("--log-every", type=int, default=10)
    t.add_argument("--log-file")
    args = ap.parse_args()
    {"eval": cmd_eval, "bench": cmd_bench, "train": cmd_train}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
