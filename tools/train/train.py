"""Train a Qwen3.5-layout model (and its MTP block) on the tokenized stdlib corpus; CPU, seeded, resumable.

Every step's batch is drawn from a generator seeded with (seed, step), so a resumed run sees exactly the batches
an uninterrupted one would. A checkpoint (model, optimizer, step) is written every --ckpt-every steps, at the end
and when --max-minutes runs out; starting again with the same --out resumes from it.
"""
import argparse, json, math, os, time
from pathlib import Path
import numpy as np
import torch
import model as M


def batch_at(data: np.ndarray, step: int, seed: int, batch: int, ctx: int) -> torch.Tensor:
    g = np.random.default_rng([seed, step])
    starts = g.integers(0, data.size - ctx, size=batch)
    return torch.from_numpy(np.stack([data[s:s + ctx] for s in starts]).astype(np.int64))


def lr_at(step: int, a) -> float:
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
    return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * progress))


def param_groups(net: torch.nn.Module, weight_decay: float):
    decay, plain = [], []
    for _, p in net.named_parameters():
        (decay if p.dim() >= 2 else plain).append(p)  # norms, biases, A_log, dt_bias: no decay
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


@torch.no_grad()
def heldout_loss(net, data: np.ndarray, a) -> tuple[float, float | None]:
    net.eval()
    main, mtp = [], []
    for i in range(a.eval_batches):
        ids = batch_at(data, i, a.seed + 1, a.batch, a.ctx)  # the same windows at every evaluation
        lm, lt = net.losses(ids)
        main.append(lm.item())
        if lt is not None:
            mtp.append(lt.item())
    net.train()
    return float(np.mean(main)), (float(np.mean(mtp)) if mtp else None)


def save_checkpoint(path: Path, net, opt, step: int, tokens: int, a):
    tmp = path.with_suffix(".tmp")
    torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "step": step, "tokens": tokens,
                "size": a.size, "config": net.lm.config.to_dict(), "seed": a.seed}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="folder written by tokenizer.py")
    ap.add_argument("--out", type=Path, required=True, help="run folder: checkpoint and log (resumed if present)")
    ap.add_argument("--size", choices=sorted(M.SIZES), required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, required=True, help="length of the whole run (sets the LR schedule)")
    ap.add_argument("--max-minutes", type=float, default=0, help="stop (with a checkpoint) after this long; 0: no limit")
    ap.add_argument("--stop-at", type=int, default=0, help="stop (with a checkpoint) after this step, keeping the "
                    "--steps schedule; 0: run to --steps")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr", type=float, default=2e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3, help="lambda in loss = CE + lambda * MTP CE")
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    meta = json.loads((a.data / "corpus.json").read_text())
    train = np.load(a.data / "train.npy")
    held = np.load(a.data / "heldout.npy")
    if held.size <= a.ctx or train.size <= a.ctx:
        raise SystemExit(f"--ctx {a.ctx} is longer than the token data in {a.data}")
    from tokenizers import Tokenizer
    eot = Tokenizer.from_file(str(a.data / "tokenizer.json")).token_to_id("<|endoftext|>")

    torch.manual_seed(a.seed)
    net = M.Qwen35WithMTP(M.make_config(a.size, meta["vocab"], eot))
    opt = torch.optim.AdamW(param_groups(net, a.weight_decay), lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    a.out.mkdir(parents=True, exist_ok=True)
    ckpt = a.out / "ckpt.pt"
    step, tokens = 0, 0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        if state["size"] != a.size or state["seed"] != a.seed:
            raise SystemExit(f"{ckpt} is a --size {state['size']} --seed {state['seed']} run; "
                             f"asked for --size {a.size} --seed {a.seed}")
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, tokens = state["step"], state["tokens"]
        print(f"resumed from {ckpt} at step {step}", flush=True)
    print(f"{a.size}: {M.n_params(net) / 1e6:.2f} M parameters ({M.n_params(net.lm) / 1e6:.2f} M without MTP), "
          f"{train.size} train / {held.size} held-out tokens, {a.batch}x{a.ctx} tokens a step", flush=True)
    log_path = a.out / "log.jsonl"
    if log_path.exists():  # steps after the checkpoint (an interrupted run) will be trained again
        kept = [r for r in log_path.read_text().splitlines() if json.loads(r)["step"] <= step]
        log_path.write_text("".join(r + "\n" for r in kept))
    log = open(log_path, "a")
    t0 = time.time()
    start_step = step
    train_seconds, last_seconds, last_step = 0.0, 0.0, step
    while step < a.steps:
        t_step = time.time()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        ids = batch_at(train, step, a.seed, a.batch, a.ctx)
        main_loss, mtp_loss = net.losses(ids)
        loss = main_loss if mtp_loss is None else main_loss + a.mtp_weight * mtp_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        train_seconds += time.time() - t_step
        step += 1
        tokens += ids.numel()
        record = {"step": step, "loss": main_loss.item(), "lr": opt.param_groups[0]["lr"]}
        if mtp_loss is not None:
            record["mtp_loss"] = mtp_loss.item()
        if step % a.eval_every == 0 or step == a.steps:
            record["heldout"], record["heldout_mtp"] = heldout_loss(net, held, a)
        stopping = (a.max_minutes > 0 and time.time() - t0 > a.max_minutes * 60) or step == a.stop_at
        if step % a.log_every == 0 or "heldout" in record or stopping or step == a.steps:
            # tokens/s counts training steps only; the ETA is wall clock, held-out evaluations included
            tps = (step - last_step) * a.batch * a.ctx / max(train_seconds - last_seconds, 1e-9)
            per_step = (time.time() - t0) / (step - start_step)
            line = f"step {step}/{a.steps} {tps:.0f} tok/s loss {record['loss']:.4f}"
            if mtp_loss is not None:
                line += f" mtp {record['mtp_loss']:.4f}"
            if "heldout" in record:
                line += f" heldout {record['heldout']:.4f}"
                if record["heldout_mtp"] is not None:
                    line += f" heldout_mtp {record['heldout_mtp']:.4f}"
            line += f" lr {record['lr']:.2e} ETA {(a.steps - step) * per_step / 60:.1f} min"
            print(line, flush=True)
            last_seconds, last_step = train_seconds, step
            record["tok_per_s"] = tps
        log.write(json.dumps(record) + "\n")
        log.flush()
        if step % a.ckpt_every == 0 or stopping or step == a.steps:
            save_checkpoint(ckpt, net, opt, step, tokens, a)
        if stopping:
            print(f"stopped at step {step} (--max-minutes / --stop-at); run again to resume", flush=True)
            break


if __name__ == "__main__":
    main()
