"""The RL math shared by the policy-gradient trainers, as small pure torch functions.

Every function takes and returns tensors, keeps no state and works on any device, so the
REINFORCE and PPO trainers here and the LLM trainers (GRPO, PPO on tokens) use the same code.
Names follow the literature and CleanRL: ``returns``, ``advantages``, ``clipfrac``, ``approx_kl``.

Time runs along dim 0 (``T`` steps, optionally ``T × N`` for ``N`` parallel envs). Episode ends
come as two flags per step, the Gymnasium way:

- ``terminated[t]``: the episode really ended after step ``t`` (goal, cliff): the value of what
  follows is 0, so nothing is bootstrapped.
- ``truncated[t]``: the episode was cut off after step ``t`` (time limit): the state it stopped
  in still has a value, so the return bootstraps from ``V(s_{t+1})``.

Either flag stops the recursion from reaching into the next episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "GroupAdvantages",
    "clipped_surrogate",
    "discounted_returns",
    "entropy",
    "explained_variance",
    "gae",
    "group_relative_advantages",
    "kl_k3",
    "masked_mean",
    "normalize",
    "policy_gradient_loss",
    "ppo_clip_loss",
    "turn_advantages",
    "value_loss",
]


def _flag(x: Tensor | None, like: Tensor) -> Tensor:
    """An end-of-episode flag as a float tensor shaped like ``like`` (zeros when ``None``)."""
    return torch.zeros_like(like) if x is None else x.to(like.dtype)


def discounted_returns(
    rewards: Tensor,
    terminated: Tensor | None = None,
    gamma: float = 0.99,
    bootstrap_value: float | Tensor = 0.0,
    truncated: Tensor | None = None,
    next_values: Tensor | None = None,
) -> Tensor:
    """Discounted return of every step, computed backwards::

        G_t = r_t + γ · G_{t+1}          inside an episode
        G_t = r_t                        if terminated[t]
        G_t = r_t + γ · V(s_{t+1})       if truncated[t]   (V from ``next_values[t]``)
        G_{T} = bootstrap_value          after the last step, unless it ended the episode

    For one complete episode (REINFORCE) pass only ``rewards`` and ``gamma``. If the last
    episode in ``rewards`` was cut off, pass its value estimate as ``bootstrap_value``
    (or flag it ``truncated`` and give ``next_values``).

    >>> discounted_returns(torch.tensor([1.0, 1.0, 1.0]), gamma=0.5)
    tensor([1.7500, 1.5000, 1.0000])
    """
    term = _flag(terminated, rewards)
    trunc = _flag(truncated, rewards)
    if truncated is not None and next_values is None:
        raise ValueError("truncated steps bootstrap from next_values; pass next_values")
    boot = torch.zeros_like(rewards) if next_values is None else next_values.to(rewards.dtype)
    returns = torch.empty_like(rewards)
    running = torch.as_tensor(bootstrap_value, dtype=rewards.dtype, device=rewards.device).expand_as(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = torch.where(trunc[t].bool(), boot[t], running)  # cut off here: V(s_{t+1}) stands in for the rest
        running = rewards[t] + gamma * (1.0 - term[t]) * running
        returns[t] = running
    return returns


def gae(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor | None = None,
    gamma: float | Tensor = 0.99,
    lam: float | Tensor = 0.95,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016). Returns ``(advantages, returns)``::

        δ_t = r_t + γ · (1 − terminated_t) · V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ · λ · (1 − done_t) · A_{t+1}          done_t = terminated_t or truncated_t
        returns_t = A_t + V(s_t)                             (the value-function target)

    ``next_values[t]`` is ``V(s_{t+1})`` of the observation that step ``t`` produced — for a
    truncated step, the observation the episode was cut off in (not the next episode's first
    one), so a time limit bootstraps and a real ending does not. λ = 1 gives Monte-Carlo
    returns minus ``V``; λ = 0 gives the one-step TD error.

    ``gamma`` and ``lam`` may also be tensors shaped like ``rewards``: then ``gamma[t]``/``lam[t]`` discount
    the step from ``t`` to ``t + 1`` (LLM PPO discounting per turn rather than per token sets them to 1
    inside a turn).
    """
    term = _flag(terminated, rewards)
    done = torch.clamp(term + _flag(truncated, rewards), max=1.0)
    deltas = rewards + gamma * (1.0 - term) * next_values - values
    per_step = isinstance(gamma, Tensor) or isinstance(lam, Tensor)
    discount = gamma * lam
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + (discount[t] if per_step else discount) * (1.0 - done[t]) * running
        advantages[t] = running
    return advantages, advantages + values


def normalize(x: Tensor, eps: float = 1e-8) -> Tensor:
    """``(x − mean(x)) / (std(x) + eps)``, the per-batch advantage normalisation of PPO.

    ``std`` is the sample standard deviation (as CleanRL and TRL compute it); a single
    element comes back as 0.
    """
    if x.numel() < 2:
        return x - x.mean()
    return (x - x.mean()) / (x.std() + eps)


class GroupAdvantages(NamedTuple):
    """What :func:`group_relative_advantages` returns."""

    advantages: Tensor
    """One advantage per sample; 0 for every sample of a tied group."""
    tied: Tensor
    """Per sample: ``True`` where its group's rewards all tie, so it carries no gradient."""
    num_groups: int
    num_tied_groups: int


def group_relative_advantages(
    rewards: Tensor,
    group_size: int | None = None,
    group_ids: Tensor | None = None,
    eps: float = 1e-4,
    scale: bool = True,
) -> GroupAdvantages:
    """GRPO advantages (Shao et al. 2024): each reward against its own group::

        A_i = (r_i − mean_g(r)) / (std_g(r) + eps)       (``scale=False``: r_i − mean_g(r))

    Groups are given either by ``group_size`` (consecutive blocks of G samples, e.g. G episodes
    of the same task instance) or by ``group_ids`` (one integer per sample, any order). ``std``
    is the sample standard deviation, as in TRL. A group whose rewards all tie (or that has a
    single sample) has no signal: its advantages are exactly 0, its samples are flagged in
    ``tied`` and it is counted in ``num_tied_groups`` — report that, don't average it away.
    """
    r = rewards.reshape(-1).to(torch.float32 if not rewards.is_floating_point() else rewards.dtype)
    if group_ids is None:
        if group_size is None or group_size < 1 or r.numel() % group_size:
            raise ValueError(f"group_size must divide the {r.numel()} rewards, got {group_size}")
        group_ids = torch.arange(r.numel(), device=r.device) // group_size
    _, inverse = torch.unique(group_ids.reshape(-1), return_inverse=True)
    n_groups = int(inverse.max()) + 1 if r.numel() else 0
    count = torch.zeros(n_groups, dtype=r.dtype, device=r.device).index_add_(0, inverse, torch.ones_like(r))
    mean = torch.zeros_like(count).index_add_(0, inverse, r) / count
    centered = r - mean[inverse]
    sq = torch.zeros_like(count).index_add_(0, inverse, centered**2)
    std = (sq / (count - 1).clamp(min=1)).sqrt()
    lo = torch.full_like(count, float("inf")).scatter_reduce_(0, inverse, r, "amin")
    hi = torch.full_like(count, float("-inf")).scatter_reduce_(0, inverse, r, "amax")
    tied_group = (hi == lo) | (count < 2)
    advantages = centered / (std[inverse] + eps) if scale else centered
    tied = tied_group[inverse]
    advantages = torch.where(tied, torch.zeros_like(advantages), advantages)
    return GroupAdvantages(
        advantages.reshape(rewards.shape), tied.reshape(rewards.shape), n_groups, int(tied_group.sum())
    )


def turn_advantages(
    turn_rewards: Sequence[Tensor],
    group_ids: Sequence[int] | None = None,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> list[Tensor]:
    """Per-turn advantages of episodes of any lengths, before batch normalisation (one tensor per episode)::

        G_t = r_t + γ · G_{t+1},  G_T = 0                  the return-to-go of turn t
        b_t = mean of G_t over the episode's group           (with ``group_ids``; else b_t = 0)
              among the group's episodes that reached turn t
        δ_t = r_t + γ · b_{t+1} − b_t,  b_T = 0
        A_t = δ_t + γ · λ · A_{t+1}                          GAE over turns with the group baseline as V

    λ = 1 gives ``A_t = G_t − b_t`` (return-to-go minus the group's mean return-to-go at that turn); λ < 1
    leans more on the baseline of later turns (less variance, more bias). Without a baseline ``A_t`` is
    the return-to-go discounted by ``γ · λ``. Every episode's last turn is terminal: nothing after it is
    bootstrapped (a truncated episode's cut-off is what the trainer's ``truncation_penalty`` prices).
    """
    returns = [discounted_returns(r, gamma=gamma) if r.numel() else r for r in turn_rewards]
    if group_ids is None:
        baselines = [torch.zeros_like(g) for g in returns]
    else:
        if len(group_ids) != len(returns):
            raise ValueError(f"{len(group_ids)} group ids for {len(returns)} episodes")
        totals: dict[tuple[int, int], list[Tensor]] = {}
        for gid, g in zip(group_ids, returns, strict=True):
            for t in range(g.numel()):
                totals.setdefault((gid, t), []).append(g[t])
        mean = {key: torch.stack(v).mean() for key, v in totals.items()}
        baselines = [
            torch.stack([mean[gid, t] for t in range(g.numel())]) if g.numel() else g
            for gid, g in zip(group_ids, returns, strict=True)
        ]
    advantages = []
    for r, b in zip(turn_rewards, baselines, strict=True):
        if not r.numel():
            advantages.append(r)
            continue
        terminal = torch.zeros_like(r)
        terminal[-1] = 1.0
        adv, _ = gae(r, b, torch.cat([b[1:], b.new_zeros(1)]), terminal, gamma=gamma, lam=lam)
        advantages.append(adv)
    return advantages


def masked_mean(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean of ``x`` over the entries where ``mask`` is 1 (all of them when ``mask`` is ``None``).

    Token-level losses use it with the loss mask (1 on policy tokens, 0 on what the env wrote).
    """
    if mask is None:
        return x.mean()
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def policy_gradient_loss(logp: Tensor, advantages: Tensor, mask: Tensor | None = None) -> Tensor:
    """REINFORCE's surrogate ``−mean(A_t · log π(a_t|s_t))``; its gradient is the policy gradient.

    ``advantages`` are treated as constants (detached).
    """
    return -masked_mean(advantages.detach() * logp, mask)


def clipped_surrogate(
    logp_new: Tensor,
    logp_old: Tensor,
    advantages: Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
) -> tuple[Tensor, Tensor]:
    """PPO's clipped surrogate per sample or token, and the probability ratio::

        ratio = exp(log π_new − log π_old)
        surrogate = min(ratio · A, clip(ratio, 1 − ε_low, 1 + ε_high) · A)

    ``eps_high`` defaults to ``eps_low`` (symmetric PPO); DAPO raises it (0.28) so unlikely tokens can
    grow. ``logp_old`` and ``advantages`` are treated as constants. Returns ``(surrogate, ratio)``.
    """
    ratio = (logp_new - logp_old.detach()).exp()
    advantages = advantages.detach()
    high = eps_low if eps_high is None else eps_high
    return torch.min(ratio * advantages, torch.clamp(ratio, 1.0 - eps_low, 1.0 + high) * advantages), ratio


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Schulman's k3 estimator of KL(π ‖ π_ref) per sampled token: ``exp(q − p) − (q − p) − 1`` with
    ``p = log π``, ``q = log π_ref`` — unbiased, always ≥ 0, low variance (what GRPO and TRL use)."""
    delta = ref_logp.detach() - logp
    return delta.exp() - delta - 1.0


def ppo_clip_loss(
    logp_new: Tensor,
    logp_old: Tensor,
    advantages: Tensor,
    clip_eps: float = 0.2,
    mask: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO's clipped surrogate (Schulman et al. 2017) as a loss, and its diagnostics::

        loss     = −mean(min(ratio · A, clip(ratio, 1 − ε, 1 + ε) · A))
        clipfrac = mean(|ratio − 1| > ε)                 share of samples the clip acted on
        approx_kl = mean((ratio − 1) − log ratio)        KL(π_old ‖ π_new) estimate (CleanRL, k3)

    Returns ``(loss, {"clipfrac", "approx_kl", "ratio"})`` with the stats as floats.
    """
    surrogate, ratio = clipped_surrogate(logp_new, logp_old, advantages, clip_eps)
    loss = -masked_mean(surrogate, mask)
    with torch.no_grad():
        stats = {
            "clipfrac": masked_mean(((ratio - 1.0).abs() > clip_eps).to(ratio.dtype), mask).item(),
            "approx_kl": masked_mean((ratio - 1.0) - ratio.log(), mask).item(),
            "ratio": masked_mean(ratio, mask).item(),
        }
    return loss, stats


def value_loss(
    values: Tensor,
    returns: Tensor,
    old_values: Tensor | None = None,
    clip_eps: float | None = None,
    reduction: Literal["mean", "none"] = "mean",
) -> Tensor:
    """Critic loss ``0.5 · mean((V(s) − returns)²)``.

    With ``old_values`` and ``clip_eps`` it is PPO's clipped variant: ``V`` may move at most
    ``clip_eps`` from ``old_values`` before the loss stops rewarding it, and the larger of the
    clipped and unclipped errors is used. ``reduction="none"`` returns the per-element loss (for a
    masked average over tokens).
    """
    returns = returns.detach()
    error = (values - returns) ** 2
    if old_values is not None and clip_eps is not None:
        clipped = old_values.detach() + torch.clamp(values - old_values.detach(), -clip_eps, clip_eps)
        error = torch.max(error, (clipped - returns) ** 2)
    return 0.5 * (error if reduction == "none" else error.mean())


def entropy(logits: Tensor) -> Tensor:
    """Entropy of the categorical distributions given by ``logits`` (last dim): ``−Σ_a π(a) log π(a)``."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def explained_variance(values: Tensor, returns: Tensor) -> float:
    """``1 − Var(returns − V) / Var(returns)``: 1 is a perfect critic, 0 no better than a constant
    (NaN when the returns do not vary)."""
    var = returns.var()
    return float("nan") if var == 0 else float(1.0 - (returns - values).var() / var)
