"""Many models of one architecture trained as one batched computation, and many checkpoints evaluated in one
pass over the data (`train.engine: batched`).

`train_many` trains the seeds and cutoffs of one model name together: parameters stacked into one [M, P]
tensor, one `torch.func.vmap` forward and backward per step, one vectorised Adam/AdamW step over the stack.
Each model keeps everything `train_one` gives it (initialisation, rows, shuffling, loss weights,
standardisation, number of steps) and equals it to float tolerance (tests/train/test_engine.py). `engine_path`
names each family's path: stacked (MLP, CNN, ResNet, ViT, FFN, TextCNN, Transformer, the linear probes) or
solo through `train_one` (recurrent heads, the references). With dropout (drift.models.blocks.Dropout) each
stacked model draws its masks from its own generator, seeded from its seed: equal to train_one in
distribution, not draw for draw; with dropout off, equal to train_one to float tolerance."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, vmap

from drift.core.params import TrainParams
from drift.models.blocks import Dropout
from drift.models.checkpoints import keep_losses, reading_inputs
from drift.models.inputs import Inputs, epoch_batches, shuffle_draws
from drift.protocol.tasks import class_weights, rating_weights
from drift.train.loop import (  # Job: what train_many takes
    Job,
    make_optimizer,
    model_to_train,
    prepare_model,
    train_one,
    training_record,
)

# input elements (float32) one stack may hold per step: bounds memory, as the solo run is bounded by one batch
INPUT_BUDGET = 2**26
# token batches share a forward while the widest is at most this factor wider than the narrowest
WIDTH_SLACK = 1.5
MASK_STREAM = 0x6D61736B  # "mask": keys each model's dropout stream apart from its seed's initialisation


def engine_path(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> tuple[str, str]:
    """('stacked' | 'solo', why) for a built model (and the optimiser make_optimizer gives it)."""
    if getattr(model, "closed_form", False):
        return "solo", "closed-form fit, no steps"
    for module in model.modules():
        if isinstance(module, nn.RNNBase):
            return "solo", "recurrent: packed sequences call .item(), which vmap cannot batch"
        if isinstance(module, nn.modules.dropout._DropoutNd) and module.p > 0:
            return "solo", "torch dropout draws from the global generator; drift.models.blocks.Dropout stacks"
    if optimizer is not None:
        d = optimizer.defaults
        if (
            type(optimizer) not in (torch.optim.Adam, torch.optim.AdamW)
            or len(optimizer.param_groups) != 1
            or d.get("amsgrad")
            or d.get("maximize")
        ):
            return "solo", f"optimiser {type(optimizer).__name__} with {d}: the engine steps plain Adam/AdamW"
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return "stacked", "batch norm: models share a forward with models of the same batch size"
    return "stacked", "vmap over stacked parameters"


def n_steps(n_rows: int, cfg: TrainParams) -> int:
    """Optimiser steps of train_one on n rows: ceil(n / batch_size) per epoch (a token pool holds 50 whole
    batches, so bucketing never adds a batch)."""
    return cfg.epochs * math.ceil(n_rows / cfg.batch_size)


def exact_sqrt(t: torch.Tensor) -> torch.Tensor:
    """sqrt by numpy on a CPU: the instruction's correctly rounded result on every SIMD width, as fused
    Adam's."""
    if t.device.type != "cpu":
        return t.sqrt()
    return torch.from_numpy(np.sqrt(t.detach().numpy()))


class StackedAdam:
    """Adam / AdamW over stacked flat parameters [M, P], the formulas of torch.optim's single-tensor Adam
    (exp_avg.lerp_, exp_avg_sq.mul_.addcmul_, bias corrections, addcdiv; AdamW's decoupled decay
    p *= 1 - lr * wd before the moments, Adam's L2 decay g += wd * p). The models stepping at a call are the
    first `n_active` rows, all at the same step number, so the bias corrections are scalars as in torch."""

    def __init__(
        self,
        flat: torch.Tensor,
        lr: float,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled: bool = False,
    ):
        self.flat, self.lr, self.betas, self.eps = flat, lr, betas, eps
        self.weight_decay, self.decoupled = weight_decay, decoupled
        self.exp_avg = torch.zeros_like(flat)
        self.exp_avg_sq = torch.zeros_like(flat)

    @classmethod
    def like(cls, optimizer: torch.optim.Optimizer, flat: torch.Tensor) -> StackedAdam:
        """The stacked twin of a torch Adam/AdamW (its hyperparameters, its kind of weight decay)."""
        d = optimizer.defaults
        decoupled = isinstance(optimizer, torch.optim.AdamW) or bool(d.get("decoupled_weight_decay", False))
        return cls(
            flat, float(d["lr"]), tuple(d["betas"]), float(d["eps"]), float(d["weight_decay"]), decoupled
        )

    @torch.no_grad()
    def step(self, n_active: int, step: int, grad: torch.Tensor) -> None:
        """Step number `step` for rows [0, n_active) of the stack, their gradients `grad` [n_active, P]."""
        p, g = self.flat[:n_active], grad
        m, v = self.exp_avg[:n_active], self.exp_avg_sq[:n_active]
        beta1, beta2 = self.betas
        if self.weight_decay:
            if self.decoupled:
                p.mul_(1 - self.lr * self.weight_decay)
            else:
                g = g.add(p, alpha=self.weight_decay)
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = math.sqrt(1 - beta2**step)
        denom = (exact_sqrt(v) / bias_correction2_sqrt).add_(self.eps)
        p.addcdiv_(m, denom, value=-self.lr / bias_correction1)


@dataclass
class _Member:
    """One model of a stack and what train_one would hold for it."""

    index: int  # its job's position in the caller's list
    model: nn.Module
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    norm: float
    batches: list[np.ndarray]  # every step's rows, epochs one after another
    epoch_ends: set[int]  # steps after which an epoch is done (progress bar)
    masks: torch.Generator  # its dropout masks' own stream, seeded from its seed


def _member(
    index: int,
    name: str,
    inputs: Inputs,
    job: Job,
    targets: torch.Tensor,
    task,
    n_outputs: int,
    cfg: TrainParams,
) -> _Member:
    """train_one's set-up, draw for draw: the same seed before the model is built, the same generator for the
    batches of every epoch, the same statistics and loss."""
    torch.manual_seed(job.seed)
    rng = np.random.default_rng(job.seed)
    model = model_to_train(name, inputs, n_outputs, task, cfg)
    draws = shuffle_draws(cfg.shuffle_draws)
    weights = None if job.weight_rows is None else targets[torch.from_numpy(job.weight_rows)]
    loss_fn, norm = prepare_model(model, inputs, job.rows, targets[torch.from_numpy(job.rows)], task, weights)
    lengths = inputs.lengths if inputs.kind == "tokens" else None
    batches, ends = [], set()
    for epoch in range(cfg.epochs):
        batches += epoch_batches(
            job.rows, lengths, cfg.batch_size, rng, cfg.batch_order, job.seed, epoch, draws
        )
        ends.add(len(batches))
    return _Member(index, model.train(), loss_fn, norm, batches, ends, mask_generator(job.seed))


def mask_generator(seed: int) -> torch.Generator:
    """The generator of a stacked model's dropout masks: a stream of its own, apart from its initialisation's."""
    state = np.random.SeedSequence([int(seed), MASK_STREAM]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))


def _per_model_elements(inputs: Inputs, rows: np.ndarray, batch_size: int) -> int:
    if inputs.kind == "tokens":
        width = int(inputs.lengths[rows].max()) if len(rows) else 1
        return batch_size * width * inputs.data.shape[1]
    return batch_size * int(np.prod(inputs.spec().shape))


def _groups(
    members: list[_Member], n_active: int, step: int, inputs: Inputs, by_size: bool
) -> list[list[int]]:
    """The active models (the first n_active) split into groups that share a forward."""
    active = list(range(n_active))
    if by_size:  # batch norm: equal batch sizes only
        sizes: dict[int, list[int]] = {}
        for i in active:
            sizes.setdefault(len(members[i].batches[step]), []).append(i)
        return list(sizes.values())
    if inputs.kind != "tokens":
        return [active]
    lengths = inputs.lengths
    widths = {i: int(lengths[members[i].batches[step]].max()) for i in active}
    groups: list[list[int]] = []
    current: list[int] = []
    for i in sorted(active, key=widths.__getitem__):
        if current and widths[i] > WIDTH_SLACK * widths[current[0]]:
            groups.append(current)
            current = []
        current.append(i)
    return groups + [current]


def _padded_rows(batches: list[np.ndarray]) -> np.ndarray:
    """[A, B] rows of a group: short batches padded with their first row (outputs that no loss reads)."""
    size = max(len(b) for b in batches)
    return np.stack([np.concatenate([b, np.repeat(b[:1], size - len(b))]) for b in batches])


class _Stack:
    """Models of one architecture as one flat parameter tensor [M, P] and stacked buffers, run with vmap."""

    def __init__(self, models: list[nn.Module], device: torch.device):
        named = list(models[0].named_parameters())
        self.names = [n for n, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.flat = (
            torch.stack([nn.utils.parameters_to_vector(m.parameters()) for m in models]).detach().to(device)
        )
        self.buffers = {
            n: torch.stack([dict(m.named_buffers())[n] for m in models]).to(device)
            for n, _ in models[0].named_buffers()
        }
        self.template = copy.deepcopy(models[0]).to("meta")  # the structure only; tensors come from the stack
        self.dropouts = [
            (n, m) for n, m in self.template.named_modules() if isinstance(m, Dropout) and m.p > 0
        ]

    def _call(self, params, buffers, noise, *x):
        return functional_call(self.template, (params, buffers, noise), x)

    def noise(
        self, xs: tuple[torch.Tensor, ...], generators: list[torch.Generator]
    ) -> dict[str, torch.Tensor]:
        """Uniform noise [A, *shape] for every active dropout of the models (one generator each) on inputs
        [A, B, ...]: the shapes from one pass of the template on meta tensors, the values from each model's
        own generator, so a model's masks follow its seed whatever it is stacked with."""
        if not self.dropouts or not self.template.training:
            return {}
        shapes: dict[str, torch.Size] = {}

        def record(name):
            def hook(module, args):
                assert name not in shapes, f"dropout {name} runs twice in a forward: one noise buffer each"
                shapes[name] = args[0].shape

            return hook

        hooks = [m.register_forward_pre_hook(record(n)) for n, m in self.dropouts]
        try:
            with torch.no_grad():
                self.template(*(x[0].to("meta") for x in xs))
        finally:
            for h in hooks:
                h.remove()
        device = xs[0].device
        return {
            f"{n}.noise": torch.stack([torch.rand(shapes[n], generator=g) for g in generators]).to(device)
            for n, _ in self.dropouts
            if n in shapes
        }

    def forward(
        self,
        flat: torch.Tensor,
        group: list[int],
        xs: tuple[torch.Tensor, ...],
        noise: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Outputs [A, B, n_outputs] of the models `group` (rows of the stack; `flat` holds rows 0..) on their
        inputs [A, B, ...]; `noise` (from .noise) feeds their dropout masks."""
        with warnings.catch_warnings():
            # CPU attention has no batching rule: vmap loops over the models for that one kernel (correct, and
            # measured in bench/bench_engine.py), and says so at every call
            warnings.filterwarnings("ignore", message="There is a performance drop")
            return self._forward(flat, group, xs, noise or {})

    def _forward(self, flat, group, xs, noise):
        first, count = group[0], len(group)
        contiguous = group == list(range(first, first + count))
        rows = slice(first, first + count) if contiguous else torch.tensor(group, device=flat.device)
        part = flat if contiguous and count == len(flat) else flat[rows]
        # one split: its backward is one concatenation into the [A, P] gradient
        params = {
            n: t.view(count, *s) for n, t, s in zip(self.names, part.split(self.sizes, dim=1), self.shapes)
        }
        buffers = {
            n: b[rows] for n, b in self.buffers.items()
        }  # views when contiguous: BN updates land in place
        out = vmap(self._call)(params, buffers, noise, *xs)
        if not contiguous:  # copies: write the updated running statistics back
            for n, b in buffers.items():
                self.buffers[n][rows] = b
        return out

    @torch.no_grad()
    def unstack(self, i: int, model: nn.Module) -> nn.Module:
        nn.utils.vector_to_parameters(self.flat[i].cpu(), model.parameters())
        for n, b in model.named_buffers():
            b.copy_(self.buffers[n][i].cpu())
        return model


class _StackedLoss:
    """The task's loss (drift.protocol.tasks.Task.loss) of many models at once, each with its own class or
    rating weights and its own factor `norm`: per row, averaged over each model's real rows, summed over the
    models (each model's gradient comes from its own term alone). One chain of operations instead of one per
    model; the formulas are the task's, checked against train_one on every task in tests/train/test_engine.py.
    Another task falls back to each model's own loss function."""

    def __init__(
        self,
        task,
        members: list[_Member],
        targets: torch.Tensor,
        jobs_rows: list[np.ndarray],
        device: torch.device,
    ):
        self.kind, self.targets, self.members, self.device = task.name, targets, members, device
        self.norm = torch.tensor([m.norm for m in members], dtype=torch.float32)
        if self.kind == "regression":  # w_r = n / n_r of each model's rows, on the ratings of the whole table
            self.levels, self.row_level = torch.unique(targets.reshape(-1).float(), return_inverse=True)
            self.weights = torch.zeros(len(members), len(self.levels))
            for i, rows in enumerate(jobs_rows):
                levels, weights = rating_weights(targets[torch.from_numpy(rows)])
                self.weights[i, torch.searchsorted(self.levels, levels)] = weights
        if self.kind == "multilabel":
            self.pos_weight = torch.stack(
                [class_weights(targets[torch.from_numpy(rows)]) for rows in jobs_rows]
            )
        for name in ("targets", "norm", "levels", "row_level", "weights", "pos_weight"):
            if hasattr(self, name):
                setattr(self, name, getattr(self, name).to(device))

    def __call__(
        self, out: torch.Tensor, group: list[int], rows: np.ndarray, counts: list[int]
    ) -> torch.Tensor:
        """Each model's loss [A] (times its `norm`: what train_one's step minimises) from out [A, B,
        n_outputs] of the models `group`, on `rows` [A, B] of which the first counts[j] are real; their sum
        goes backward."""
        if self.kind not in ("binary", "multiclass", "regression", "multilabel"):
            return torch.stack(
                [
                    self.members[i].loss_fn(
                        out[j, :n], self.targets[torch.from_numpy(rows[j, :n]).to(self.device)]
                    )
                    * self.members[i].norm
                    for j, (i, n) in enumerate(zip(group, counts))
                ]
            )
        a, b = rows.shape
        rows_t, index = torch.from_numpy(rows).to(self.device), torch.tensor(group, device=self.device)
        y = self.targets[rows_t]
        if self.kind in ("binary", "multiclass"):
            per_row = F.cross_entropy(out.reshape(a * b, -1), y.reshape(-1), reduction="none").view(a, b)
        elif self.kind == "regression":
            w = self.weights[index[:, None], self.row_level[rows_t]]
            per_row = w * (out.reshape(a, b) - y.to(out.dtype)) ** 2
        else:
            per_row = F.binary_cross_entropy_with_logits(
                out, y.to(out.dtype), reduction="none", pos_weight=self.pos_weight[index][:, None, :]
            ).mean(-1)
        counts_t = torch.tensor(counts, device=self.device)
        real = torch.arange(b, device=self.device)[None, :] < counts_t[:, None]
        per_model = torch.where(real, per_row, 0.0).sum(1) / counts_t
        return per_model * self.norm[index]


def _train_stack(
    members: list[_Member],
    inputs: Inputs,
    targets: torch.Tensor,
    task,
    jobs: list[Job],
    optimizer,
    bar,
    device: torch.device,
    grad_clip: float | None = None,
) -> None:
    members.sort(key=lambda m: -len(m.batches))  # stable: the models still training are always a prefix
    stack = _Stack([m.model for m in members], device)
    # each model's loss weights come from its weight rows (train.loss_weights split), else its training rows
    weight_rows = [
        job.rows if job.weight_rows is None else job.weight_rows for job in (jobs[m.index] for m in members)
    ]
    loss_of = _StackedLoss(task, members, targets, weight_rows, device)
    adam = StackedAdam.like(optimizer, stack.flat)
    by_size = any(isinstance(x, nn.modules.batchnorm._BatchNorm) for x in members[0].model.modules())
    n_active = len(members)
    # each model's loss summed over its epoch's rows (float64, as train_one sums in Python floats), and its
    # rows
    totals = torch.zeros(len(members), dtype=torch.float64, device=device)
    seen = [0] * len(members)
    curves: list[list[float]] = [[] for _ in members]
    for t in range(len(members[0].batches)):
        while len(members[n_active - 1].batches) <= t:
            n_active -= 1
        live = (
            stack.flat[:n_active].detach().requires_grad_()
        )  # this step's leaf: its .grad is [A, P] at once
        for group in _groups(members, n_active, t, inputs, by_size):
            batches = [members[i].batches[t] for i in group]
            rows = _padded_rows(batches)
            xs = tuple(
                x.reshape(*rows.shape, *x.shape[1:]).to(device) for x in inputs.batch(rows.reshape(-1))
            )
            out = stack.forward(live, group, xs, stack.noise(xs, [members[i].masks for i in group]))
            counts = [len(b) for b in batches]
            losses = loss_of(out, group, rows, counts)
            losses.sum().backward()
            weights = torch.tensor(counts, dtype=torch.float64, device=device)
            totals[torch.tensor(group, device=device)] += losses.detach().double() * weights
            for i, n in zip(group, counts):
                seen[i] += n
        grad = live.grad
        assert grad is not None  # every active model is in a group, and each group's loss went backward
        if grad_clip is not None:  # each model's own gradient norm, as clip_grad_norm_ in train_one
            norms = grad.norm(dim=1, keepdim=True)
            grad.mul_(torch.clamp(grad_clip / (norms + 1e-6), max=1.0))
        adam.step(n_active, t + 1, grad)
        ended = [i for i, m in enumerate(members[:n_active]) if t + 1 in m.epoch_ends]
        for i in ended:  # the epoch's mean loss, as train_one's
            curves[i].append(float(totals[i]) / seen[i])
            totals[i], seen[i] = 0.0, 0
        if bar is not None:
            bar.advance(len(ended))
    for i, m in enumerate(members):
        keep_losses(stack.unstack(i, m.model), curves[i])


def train_many(
    name: str,
    inputs: Inputs,
    jobs: list[Job],
    targets: torch.Tensor,
    task,
    n_outputs: int,
    cfg: TrainParams,
    modality: str = "text",
    bar=None,
    max_stack: int = 16,
    device: str | torch.device = "cpu",
) -> list[nn.Module]:
    """train_one for every job (rows, seed) of one model name, as few batched computations: returns the models
    in the jobs' order, in eval mode, equal to train_one's to float tolerance, each carrying its mean training
    loss per epoch as train_one's does (keep_losses). Families that do not stack
    (engine_path) are trained one after another by train_one itself. `device`: where the stacks compute (a
    CUDA device, say); the models come back on the CPU like train_one's, and the solo path stays on the CPU.
    """
    if not jobs:
        return []
    probe = model_to_train(name, inputs, n_outputs, task, cfg)
    training = training_record(name, modality, cfg, inputs, engine="batched")
    optimizer = None if getattr(probe, "closed_form", False) else make_optimizer(probe, training)
    if engine_path(probe, optimizer)[0] == "solo":
        return [
            train_one(
                name,
                inputs,
                job.rows,
                targets,
                task,
                n_outputs,
                cfg,
                job.seed,
                modality,
                bar,
                job.weight_rows,
            )
            for job in jobs
        ]
    inputs = reading_inputs(probe, inputs)  # every member is built as the probe: the same scale of pixels
    # jobs of similar length share a stack, so few models idle; a stack holds at most INPUT_BUDGET input
    # elements
    order = sorted(range(len(jobs)), key=lambda i: -n_steps(len(jobs[i].rows), cfg))
    per_model = max(_per_model_elements(inputs, job.rows, cfg.batch_size) for job in jobs)
    size = max(1, min(max_stack, INPUT_BUDGET // max(per_model, 1)))
    trained: dict[int, nn.Module] = {}
    for start in range(0, len(order), size):
        members = [
            _member(i, name, inputs, jobs[i], targets, task, n_outputs, cfg)
            for i in order[start : start + size]
        ]
        if len(members[0].batches):
            _train_stack(
                members, inputs, targets, task, jobs, optimizer, bar, torch.device(device), cfg.grad_clip
            )
        for m in members:
            trained[m.index] = m.model.eval()
    return [trained[i] for i in range(len(jobs))]
