"""parasync-node's synthetic click log (--dataset=clicklog[:F:V[:S]],
core/engine/click_log.cpp) in NumPy, so that a Python worker's shard is a
shard of the same problem the C++ workers train on: the same ids for each
(field, value) (click_log_id), the same hidden logistic model for a seed
(hidden_weights), the same draw of each sample from (seed, shard, sample).

Every sample is a function of (seed, shard index, sample index) alone,
computed with the C++ code's own hash (splitmix64) and Zipf sampler
(rejection-inversion); only NumPy's exp/log/cos, which may differ from the C
library's in the last bit, stand between the two. So a shard drawn here is,
but for such a rare last-bit difference, the shard parasync-node draws.
"""

from __future__ import annotations

import dataclasses
import math
import re
import numpy as np
import numpy.typing as npt

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MAX_FIELDS = 1000
_MAX_VALUES_PER_FIELD = 100000000
_MAX_ZIPF = 5.0
# The hidden model: logit = bias + one N(0, stddev) weight per id (click_log.cpp).
_HIDDEN_BIAS = 0.0
_HIDDEN_WEIGHT_STDDEV = 0.7


@dataclasses.dataclass(frozen=True)
class ClickLogShape:
    fields: int = 10  # ids per sample
    values_per_field: int = 100000  # each field's vocabulary
    zipf: float = 2.0  # exponent of the values' Zipf law


@dataclasses.dataclass
class ClickLog:
    """A drawn shard: ids[i] are sample i's ids (one per field), labels[i]
    its click (0 or 1), true_probability[i] the hidden model's probability
    of a click."""
    ids: npt.NDArray[np.uint64]  # samples x fields
    labels: npt.NDArray[np.float32]
    true_probability: npt.NDArray[np.float32]


def _usage() -> str:
    return ("write clicklog, clicklog:FIELDS:VALUES or clicklog:FIELDS:VALUES:ZIPF (e.g. clicklog:10:1000:1.1: 10 "
            f"fields of 1000 values each, drawn with Zipf exponent 1.1), with FIELDS from 1 to {_MAX_FIELDS}, "
            f"VALUES from 2 to {_MAX_VALUES_PER_FIELD} and ZIPF more than 0 and at most 5")


def parse_spec(spec: str) -> ClickLogShape:
    """The shape a --dataset of "clicklog", "clicklog:F:V" or "clicklog:F:V:S"
    gives; raises ValueError naming the bad part, as parasync-node does."""
    if spec == "clicklog":
        return ClickLogShape()
    if not spec.startswith("clicklog:"):
        raise ValueError(f"dataset '{spec}' is not a click log: {_usage()}")
    parts = spec[9:].split(":")
    if len(parts) not in (2, 3) or not all(re.fullmatch(r"[+-]?\d+", p) for p in parts[:2]):
        raise ValueError(f"dataset '{spec}': {_usage()}")
    try:
        zipf = float(parts[2]) if len(parts) == 3 else 2.0
    except ValueError:
        raise ValueError(f"dataset '{spec}': {_usage()}") from None
    shape = ClickLogShape(int(parts[0]), int(parts[1]), zipf)
    if not 1 <= shape.fields <= _MAX_FIELDS:
        raise ValueError(f"dataset '{spec}': the number of fields must be from 1 to {_MAX_FIELDS}, "
                         f"got {shape.fields}")
    if not 2 <= shape.values_per_field <= _MAX_VALUES_PER_FIELD:
        raise ValueError(f"dataset '{spec}': the values per field must be from 2 to {_MAX_VALUES_PER_FIELD}, "
                         f"got {shape.values_per_field}")
    if not 0 < shape.zipf <= _MAX_ZIPF:
        raise ValueError(f"dataset '{spec}': the Zipf exponent must be more than 0 and at most 5, got {shape.zipf} "
                         "(a long tail of values is about 1.1, the default 2)")
    return shape


# -- the hash, on Python integers (scalars) and uint64 arrays -----------------------------------------------------

def _mix_int(x: int) -> int:
    x &= _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _hash_pair_int(a: int, b: int) -> int:
    return _mix_int(_mix_int(a + _GOLDEN) ^ ((b + 0x2545F4914F6CDD1D) & _MASK))


def _hash_pair(a: int, b: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """hashPair(a, b) for a scalar a and an array of b."""
    return _mix(np.uint64(_mix_int(a + _GOLDEN)) ^ (b + np.uint64(0x2545F4914F6CDD1D)))


def _unit(bits: npt.NDArray[np.uint64]) -> npt.NDArray[np.float64]:
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _open_unit(bits: npt.NDArray[np.uint64]) -> npt.NDArray[np.float64]:
    return ((bits >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0 ** -53


def click_log_id(field: int, values: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """clickLogId(field, value): the 64-bit id of each value of a field."""
    key = _mix_int((field * _GOLDEN + 0x1D8E4E27C47D124F) & _MASK)
    return _mix(np.uint64(key) ^ np.asarray(values, dtype=np.int64).astype(np.uint64))


def hidden_weights(seed: int, ids: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The generating model's weight of each id for --seed=seed: what every
    shard's, and the held-out draw's, labels come from."""
    key = _hash_pair_int(seed, 0x776569676874)
    hashed = _hash_pair(key, np.asarray(ids, dtype=np.uint64))
    u1 = _open_unit(_mix(hashed))
    u2 = _unit(_mix(hashed ^ np.uint64(_GOLDEN)))
    return _HIDDEN_WEIGHT_STDDEV * np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


class _Zipf:
    """Zipf(s) over ranks 1..n by rejection-inversion (Hörmann and
    Derflinger, 1996), as click_log.cpp's ZipfSampler: the same arithmetic,
    on arrays of uniforms."""

    def __init__(self, n: int, exponent: float) -> None:
        self.n = float(n)
        self.s = exponent
        # The constants with the C library's log and exp, as the C++ constructor has them.
        self.h_integral_x1 = self._h_integral_scalar(1.5) - 1.0
        self.h_integral_n = self._h_integral_scalar(self.n + 0.5)
        x = self._h_integral_scalar(2.5) - math.exp(-exponent * math.log(2.0))
        t = max(x * (1.0 - exponent), -1.0)
        log1p_over_x = math.log1p(t) / t if abs(t) > 1e-8 else 1.0 - t * (0.5 - t * (1.0 / 3.0 - 0.25 * t))
        self.threshold = 2.0 - math.exp(log1p_over_x * x)

    def _h_integral_scalar(self, x: float) -> float:
        log_x = math.log(x)
        y = (1.0 - self.s) * log_x
        if abs(y) > 1e-8:
            return math.expm1(y) / y * log_x
        return (1.0 + y * 0.5 * (1.0 + y * (1.0 / 3.0) * (1.0 + 0.25 * y))) * log_x

    def _h(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.exp(-self.s * np.log(x))

    def _h_integral(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        log_x = np.log(x)
        return _expm1_over_x((1.0 - self.s) * log_x) * log_x

    def _h_integral_inverse(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        t = np.maximum(x * (1.0 - self.s), -1.0)
        return np.exp(_log1p_over_x(t) * x)

    def accept(self, uniform: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """The rank each uniform draws, and whether it is accepted."""
        u = self.h_integral_n + uniform * (self.h_integral_x1 - self.h_integral_n)
        x = self._h_integral_inverse(u)
        k = np.clip(np.floor(x + 0.5), 1.0, self.n)
        accepted = (k - x <= self.threshold) | (u >= self._h_integral(k + 0.5) - self._h(k))
        return k.astype(np.int64), accepted


def _log1p_over_x(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    small = np.abs(x) <= 1e-8
    safe = np.where(small, 1.0, x)
    return np.where(small, 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x)), np.log1p(safe) / safe)


def _expm1_over_x(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    small = np.abs(x) <= 1e-8
    safe = np.where(small, 1.0, x)
    return np.where(small, 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x)), np.expm1(safe) / safe)


def _rank_to_value(field: int, values: int) -> tuple[int, int]:
    """(multiplier, offset) of field's affine map from popularity rank to value."""
    key = _hash_pair_int(0x636C69636B6C6F67, field)
    offset = _mix_int(key) % values
    multiplier = 1 + _mix_int(key ^ _GOLDEN) % (values - 1)
    while math.gcd(multiplier, values) != 1:
        multiplier = multiplier % (values - 1) + 1
    return multiplier, offset


def make_click_log(shape: ClickLogShape, seed: int, shard_index: int, samples: int) -> ClickLog:
    """Worker shard `shard_index`'s `samples` samples of the log drawn for
    --seed=seed (makeClickLog): the training shard of worker:i is shard i;
    the chief's held-out data (--eval_dataset=clicklog) is the shard whose
    index is the number of workers."""
    if samples < 1:
        raise ValueError(f"the number of samples must be at least 1, got {samples}")
    zipf = _Zipf(shape.values_per_field, shape.zipf)
    shard_key = _hash_pair_int(_hash_pair_int(seed, 0x73616D706C65), shard_index & _MASK)
    # Each sample's counter-based stream: word i is mix(key + (i + 1) golden).
    state = _hash_pair(shard_key, np.arange(samples, dtype=np.uint64))

    def uniforms(rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        state[rows] += np.uint64(_GOLDEN)
        return _unit(_mix(state[rows]))

    ids = np.empty((samples, shape.fields), dtype=np.uint64)
    for f in range(shape.fields):
        ranks = np.empty(samples, dtype=np.int64)
        pending = np.arange(samples)
        while pending.size:
            rank, accepted = zipf.accept(uniforms(pending))
            ranks[pending[accepted]] = rank[accepted]
            pending = pending[~accepted]
        multiplier, offset = _rank_to_value(f, shape.values_per_field)
        values = (np.uint64(multiplier) * (ranks - 1).astype(np.uint64) + np.uint64(offset)) \
            % np.uint64(shape.values_per_field)
        ids[:, f] = click_log_id(f, values.astype(np.int64))
    weights = hidden_weights(seed, ids.ravel()).reshape(ids.shape)
    # Field after field, as the C++ sums them (numpy's sum would pair them otherwise).
    logit = np.full(samples, _HIDDEN_BIAS)
    for f in range(shape.fields):
        logit += weights[:, f]
    probability = 1.0 / (1.0 + np.exp(-logit))
    labels = (uniforms(np.arange(samples)) < probability).astype(np.float32)
    return ClickLog(ids, labels, probability.astype(np.float32))


def area_under_roc(scores: npt.ArrayLike, labels: npt.ArrayLike) -> float:
    """AUC of scores against 0/1 labels, ties counting half (areaUnderRoc):
    NaN when either class is missing."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    positive = np.asarray(labels).ravel() > 0.5
    order = np.argsort(scores, kind="stable")
    ordered = scores[order]
    # Each tie group's average rank (1-based).
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    ends = np.concatenate((starts[1:], [ordered.size]))
    ranks = np.empty(ordered.size)
    ranks[order] = np.repeat(0.5 * (starts + 1 + ends), ends - starts)
    positives = float(positive.sum())
    negatives = float(positive.size) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    return float((ranks[positive].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def log_loss(probabilities: npt.ArrayLike, labels: npt.ArrayLike) -> float:
    """Mean log loss, the probabilities clamped to [1e-7, 1 - 1e-7] (logLoss)."""
    p = np.clip(np.asarray(probabilities, dtype=np.float64).ravel(), 1e-7, 1 - 1e-7)
    y = np.asarray(labels).ravel() > 0.5
    return float(-np.mean(np.where(y, np.log(p), np.log(1.0 - p))))

