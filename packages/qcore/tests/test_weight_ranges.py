"""qcore.int8.weight_ranges: target-aware weight observers and mappings that use them."""

from __future__ import annotations

import int16_pairs as pairs
import torch
from torch.ao.quantization import (
    FusedMovingAvgObsFakeQuantize,
    PerChannelMinMaxObserver,
    get_default_qat_qconfig_mapping,
    get_default_qconfig_mapping,
)
from torch.ao.quantization.qconfig import qconfig_equals

from qcore import host
from qcore.int8.saturation import RangeChoice
from qcore.int8.weight_ranges import (
    SAFE_QRANGE,
    TargetWeightObserver,
    applying,
    fit_qconfig,
    fit_qconfig_mapping,
)

WEIGHT = torch.randn(6, 4, 3, 3, generator=torch.Generator().manual_seed(0))
AMAX = WEIGHT.reshape(6, -1).abs().amax(1)


def _scales(observer: torch.nn.Module, weight: torch.Tensor = WEIGHT) -> torch.Tensor:
    observer(weight)
    scale, zero_point = observer.calculate_qparams()  # type: ignore[operator]
    assert not zero_point.any()
    return scale


def test_default_is_the_safe_range_and_its_codes_cannot_overflow() -> None:
    scale = _scales(TargetWeightObserver())
    torch.testing.assert_close(scale, AMAX / 63.5)
    codes = torch.round(WEIGHT / scale.reshape(-1, 1, 1, 1))
    assert codes.abs().max() <= 64  # 255 * 64 * 2 = 32640 fits int16


def test_a_full_choice_is_bit_identical_to_torchs_observer() -> None:
    choice = RangeChoice((127.5,) * 6, 127.5, 40.0, 40.0, 0.0)
    with applying({WEIGHT: choice}):
        ours = _scales(TargetWeightObserver())
    torch_scale = _scales(PerChannelMinMaxObserver(dtype=torch.qint8,
                                                   qscheme=torch.per_channel_symmetric))
    assert torch.equal(ours, torch_scale)


def test_a_mixed_choice_sets_each_channel_and_applies_only_to_its_weight() -> None:
    halves = (127.5, 63.5, 95.5, 127.5, 79.5, 111.5)
    choice = RangeChoice(halves, 127.5, 20.0, 35.0, 0.1)
    other = WEIGHT.clone()
    with applying({WEIGHT: choice}):
        torch.testing.assert_close(_scales(TargetWeightObserver()), AMAX / torch.tensor(halves))
        torch.testing.assert_close(_scales(TargetWeightObserver(), other), AMAX / 63.5)
    torch.testing.assert_close(_scales(TargetWeightObserver()), AMAX / 63.5)  # scope ended


def test_mapping_is_untouched_for_targets_that_do_not_saturate() -> None:
    for name in ("avx512_vnni", "amx", "baseline"):
        with host.targeting(name):
            mapping = fit_qconfig_mapping(get_default_qconfig_mapping("onednn"))
        reference = get_default_qconfig_mapping("onednn")
        assert qconfig_equals(mapping.global_qconfig, reference.global_qconfig)
        for key, qconfig in reference.object_type_qconfigs.items():
            assert qconfig_equals(mapping.object_type_qconfigs[key], qconfig)


def test_saturating_target_changes_only_weights_and_keeps_equal_qconfigs_equal() -> None:
    reference = get_default_qconfig_mapping("onednn")
    with host.targeting("avx2"):
        mapping = fit_qconfig_mapping(get_default_qconfig_mapping("onednn"))
    assert mapping.global_qconfig is not None and reference.global_qconfig is not None
    # the activation factory is torch's, untouched (same class and arguments)
    assert repr(mapping.global_qconfig.activation) == repr(reference.global_qconfig.activation)
    assert isinstance(mapping.global_qconfig.weight(), TargetWeightObserver)
    ours, theirs = mapping.object_type_qconfigs, reference.object_type_qconfigs
    for a in theirs:
        for b in theirs:
            assert (ours[a] is ours[b]) == (theirs[a] is theirs[b])


def test_qat_fake_quants_train_with_the_safe_range() -> None:
    with host.targeting("avx2"):
        mapping = fit_qconfig_mapping(get_default_qat_qconfig_mapping("onednn"))
    assert mapping.global_qconfig is not None
    fake_quant = mapping.global_qconfig.weight()
    assert isinstance(fake_quant, FusedMovingAvgObsFakeQuantize)
    assert (fake_quant.quant_min, fake_quant.quant_max) == SAFE_QRANGE
    fake_quant(WEIGHT)
    scale, _ = fake_quant.calculate_qparams()
    torch.testing.assert_close(scale, AMAX / 63.5)


def test_a_weight_range_that_can_overflow_is_made_safe_and_a_safe_one_is_kept() -> None:
    """Brute force on the codes: [-80, 80] weights can overflow an int16 pair (255 * 80 *
    2 > 32767), so the fitted observer's codes must not; [-64, 63] ones cannot, so the
    observer is torch's, untouched."""
    from torch.ao.quantization import QConfig, default_observer

    wide = PerChannelMinMaxObserver.with_args(
        dtype=torch.qint8, qscheme=torch.per_channel_symmetric, quant_min=-80, quant_max=80
    )
    torch_scale = _scales(wide())
    torch_codes = torch.round(WEIGHT / torch_scale.reshape(-1, 1, 1, 1))
    assert bool(pairs.any_input_can_overflow(torch_codes).any())
    with host.targeting("avx2"):
        fitted = fit_qconfig(QConfig(activation=default_observer, weight=wide))
    scale = _scales(fitted.weight())
    codes = torch.round(WEIGHT / scale.reshape(-1, 1, 1, 1))
    assert not bool(pairs.any_input_can_overflow(codes).any())
    narrow = PerChannelMinMaxObserver.with_args(
        dtype=torch.qint8, qscheme=torch.per_channel_symmetric, quant_min=-64, quant_max=63
    )
    with host.targeting("avx2"):
        kept = fit_qconfig(QConfig(activation=default_observer, weight=narrow))
    assert kept.weight is narrow
