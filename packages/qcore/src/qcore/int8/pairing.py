"""Input-channel orders in which no int16 pair of an int8 kernel without VNNI can overflow.

Such a kernel adds the products of input channels ``2j`` and ``2j + 1`` in one saturating
16-bit lane (``qcore.int8.saturation``): which channels share a lane is only a matter of
their order. Where every large weight can be placed next to a small one, or one of the
other sign, in every output channel at once, the layer computes exactly at single depth
with its full-range weights; no range is narrowed and no reduction doubled. That order
usually exists for a narrow layer (a classifier of a few classes: each channel is large in
few outputs) and rarely for a wide one (every channel is large somewhere).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qcore.int8.saturation import INT16_MAX, worst_case_pair_sum

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["safe_order"]


def safe_order(codes: Tensor, act_max: int = 255) -> Tensor | None:
    """An order of the input channels of integer weight ``codes`` (``(out, in, *kernel)``
    or ``(out, in)``, one group) in which no pair of neighbours overflows int16 on inputs
    in ``[0, act_max]``; None where none is found.

    Greedy: the channel with the largest weight first, each next to the hardest channel
    it can share a lane with (saving the easy ones for later). A pair can share a lane
    when, in every output channel and kernel tap, its same-sign weights sum to at most
    ``INT16_MAX // act_max``. The order returned is checked with
    :func:`~qcore.int8.saturation.worst_case_pair_sum` (odd counts: the last channel meets
    the kernel's zero padding).
    """
    import torch

    limit = INT16_MAX // act_max
    # one column per input channel: its weights in every output channel and tap
    columns = codes.detach().to(torch.int64).transpose(0, 1).reshape(codes.shape[1], -1)
    positive, negative = columns.clamp(min=0), (-columns).clamp(min=0)
    hardness = columns.abs().amax(1)
    free = torch.ones(len(columns), dtype=torch.bool)
    order: list[int] = []
    # (stable: channels of equal hardness in index order, the same walk on every CPU)
    for channel in torch.argsort(hardness, descending=True, stable=True).tolist():
        if not free[channel]:
            continue
        free[channel] = False
        fits = (
            free
            & ((positive + positive[channel]) <= limit).all(1)
            & ((negative + negative[channel]) <= limit).all(1)
        )
        if not fits.any():
            if free.any():
                return None
            order.append(channel)  # the last of an odd count: paired with padding
            break
        candidates = torch.nonzero(fits).flatten()
        partner = int(candidates[hardness[candidates].argmax()])
        free[partner] = False
        order += [channel, partner]
    result = torch.tensor(order)
    if worst_case_pair_sum(codes.index_select(1, result), act_max) > INT16_MAX:
        return None
    return result
