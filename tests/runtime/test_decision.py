"""The clear-win decision (mirage_jax/runtime/decision.py) on synthetic timing rounds: a
clear win is kept, a clear loss and noise around 1 are not, more rounds are taken only while
the interval straddles the bar with the point ratio at least halfway to it, and never past
the budget, and a seeded result is reproducible."""

import numpy as np
import pytest

from mirage_jax.runtime import decision, profile


def rounds(centre, spread, n, seed):
    rng = np.random.default_rng(seed)
    return list(centre * (1 + spread * rng.uniform(-1, 1, n)))


def test_a_clear_win_is_kept():
    d = decision.clear_win(rounds(1.3e-3, 0.05, 30, 1), rounds(1.0e-3, 0.05, 30, 2))
    assert d.kept and 1.2 < d.low <= d.ratio <= d.high < 1.4 and d.rounds == 30


def test_a_clear_loss_is_not_kept():
    d = decision.clear_win(rounds(1.0e-3, 0.05, 30, 1), rounds(1.3e-3, 0.05, 30, 2))
    assert not d.kept and d.high < 1.0
    assert "a clear loss" in d.describe()


def test_noise_around_one_straddles_and_is_not_kept():
    # 3% faster in truth, 40% noise per round, 20 rounds: the interval holds 1
    d = decision.clear_win(rounds(1.03e-3, 0.4, 20, 1), rounds(1.0e-3, 0.4, 20, 2))
    assert not d.kept and d.low < 1.0 < d.high
    assert "not a clear win of 1.10x or more, so XLA is kept" in d.describe()


def test_a_steady_win_of_five_percent_is_too_small_to_keep():
    # 5% faster in every round: clear, but a load that moves it several percent between
    # processes would keep it in one and drop it in the next
    phase = rounds(1.0, 0.2, 40, 5)
    d = decision.clear_win([1.05e-3 * p for p in phase], [1.0e-3 * p for p in phase])
    assert not d.kept and d.low == pytest.approx(1.05) and d.high == pytest.approx(1.05)
    d = decision.clear_win([1.12e-3 * p for p in phase], [1.0e-3 * p for p in phase])
    assert d.kept and d.low == pytest.approx(1.12)


def test_the_whole_program_clears_a_lower_bar_than_a_region():
    # a program whose kernels each won their regions by 1.10x keeps them when it is clearly
    # 5% faster as a whole (the rest of the program dilutes the gain), not when it is 2%
    from mirage_jax.rewrite import whole_program

    phase = rounds(1.0, 0.2, 40, 5)
    five = [1.05e-3 * p for p in phase], [1.0e-3 * p for p in phase]
    d = decision.clear_win(*five, min_speedup=whole_program.MIN_SPEEDUP)
    assert d.kept and "a clear win" in d.describe()
    assert not decision.clear_win(*five).kept
    two = [1.02e-3 * p for p in phase], [1.0e-3 * p for p in phase]
    d = decision.clear_win(*two, min_speedup=whole_program.MIN_SPEEDUP)
    assert not d.kept and "not a clear win of 1.03x or more" in d.describe()


def test_a_machine_wide_slow_phase_falls_on_both_and_is_paired_out():
    # every round's speed differs by up to 3x (the machine), the candidate is 20% faster in
    # each: unpaired this would straddle, paired it is clear
    phase = rounds(1.0, 0.5, 25, 7)
    xla = [1.2e-3 * p for p in phase]
    candidate = [1.0e-3 * p for p in phase]
    d = decision.clear_win(xla, candidate)
    assert d.kept and d.low == pytest.approx(1.2) and d.high == pytest.approx(1.2)


def test_the_result_is_reproducible_and_depends_on_the_seed():
    x, c = rounds(1.05e-3, 0.3, 15, 1), rounds(1.0e-3, 0.3, 15, 2)
    assert decision.ratio_interval(x, c) == decision.ratio_interval(x, c)
    assert decision.ratio_interval(x, c, seed=1) != decision.ratio_interval(x, c, seed=2)


def test_bad_samples_are_refused():
    with pytest.raises(ValueError, match="one sample per round"):
        decision.ratio_interval([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite positive"):
        decision.ratio_interval([1.0, float("nan")], [1.0, 1.0])


def times(xla, candidate):
    return profile.Times({"xla": xla, "k": candidate})


def near(ratio, n, seed):
    """(xla, candidate) rounds with the candidate `ratio` times faster than XLA, each round's
    speed shared by both (the machine) and 15% of noise apart."""
    phase = rounds(1.0, 0.5, n, seed)
    x, c = rounds(1.0, 0.15, n, seed + 100), rounds(1.0, 0.15, n, seed + 200)
    return [ratio * 1e-3 * p * e for p, e in zip(phase, x)], [
        1e-3 * p * e for p, e in zip(phase, c)
    ]


def test_decide_samples_more_while_the_interval_straddles_then_keeps_xla():
    asked = []

    def more(budget_s):
        asked.append(budget_s)
        return times(*near(1.08, 10, len(asked)))

    first = times(*near(1.08, 10, 0))
    assert (
        decision.worth_more_rounds(decision.MIN_SPEEDUP)
        <= decision.clear_win(first.samples["xla"], first.samples["k"]).ratio
    )
    d = decision.decide(first, "xla", "k", more)
    assert not d.kept and d.low < decision.MIN_SPEEDUP < d.high
    assert sum(asked) == pytest.approx(decision.EXTRA_BUDGET_S)
    assert d.rounds == 10 * (1 + len(asked))


def test_decide_counts_the_wall_time_of_its_extra_rounds(monkeypatch):
    # each call of the timer takes 1.6 s (a 100 ms program: warm-up and 5 rounds of both),
    # not the 0.5 s asked: two calls spend the 3 s budget
    clock = [0.0]
    monkeypatch.setattr(decision.time, "perf_counter", lambda: clock[0])
    asked = []

    def more(budget_s):
        asked.append(budget_s)
        clock[0] += 1.6
        return times(*near(1.08, 10, len(asked)))

    d = decision.decide(times(*near(1.08, 10, 0)), "xla", "k", more)
    assert not d.kept and len(asked) == 2


def test_decide_takes_no_more_rounds_for_a_ratio_short_of_halfway():
    # about 1.0x, straddling 1.10 with this noise: more rounds would narrow it around 1
    def more(budget_s):
        raise AssertionError("no more rounds should be taken")

    first = times(*near(1.0, 10, 3))
    d = decision.decide(first, "xla", "k", more)
    assert not d.kept and d.high > decision.MIN_SPEEDUP and d.rounds == 10
    assert d.ratio < decision.worth_more_rounds(decision.MIN_SPEEDUP)


def test_decide_stops_sampling_once_the_win_is_clear():
    asked = []

    def more(budget_s):
        asked.append(budget_s)
        return times(rounds(1.2e-3, 0.05, 40, 3), rounds(1.0e-3, 0.05, 40, 4))

    # 5 noisy rounds straddle; one more batch of 40 steady ones settles it
    first = times(rounds(1.2e-3, 0.6, 5, 1), rounds(1.0e-3, 0.6, 5, 2))
    assert decision.clear_win(first.samples["xla"], first.samples["k"]).low < 1.0
    d = decision.decide(first, "xla", "k", more)
    assert d.kept and len(asked) == 1 and d.rounds == 45


def test_the_whole_program_takes_more_rounds_for_a_ratio_near_one():
    # Its kernels each won their regions clearly: a first timing of about 1.0x with an
    # interval that reaches the bar is taken again (a region's would not be), and the win
    # the machine's noisy stretch hid is kept; a clear loss gets no more rounds.
    from mirage_jax.rewrite import whole_program

    bar = whole_program.MIN_SPEEDUP
    first = times(*near(0.99, 12, 3))
    d = decision.clear_win(first.samples["xla"], first.samples["k"], min_speedup=bar)
    assert d.ratio < decision.worth_more_rounds(bar) and d.high > bar and not d.kept
    asked = []

    def more(budget_s):
        asked.append(budget_s)
        return times(*near(1.4, 20, len(asked)))

    def no_more(budget_s):
        raise AssertionError("no more rounds should be taken")

    assert not decision.decide(first, "xla", "k", no_more, min_speedup=bar).kept
    kept = decision.decide(
        first, "xla", "k", more, min_speedup=bar, more_from=whole_program.MORE_ROUNDS_FROM
    )
    assert kept.kept and len(asked) >= 1 and kept.rounds == 12 + 20 * len(asked)
    # straddling the bar too, but pointing at a loss as large as the win asked for
    loss = times(*near(0.99, 12, 16))
    lost = decision.decide(
        loss, "xla", "k", no_more, min_speedup=bar, more_from=whole_program.MORE_ROUNDS_FROM
    )
    assert not lost.kept and lost.high > bar and lost.ratio < whole_program.MORE_ROUNDS_FROM


def test_profile_returns_paired_samples_in_a_seeded_random_order(monkeypatch):
    calls = []
    functions = {n: (lambda n=n: calls.append(n)) for n in "abcd"}
    monkeypatch.setattr(profile, "WARMUP_CALLS", 0)
    monkeypatch.setattr(profile, "MIN_ROUNDS", 6)
    timed, n = profile.median_times(functions, [], budget_s=0.0)
    assert n == 6 and all(len(timed.samples[name]) == 6 for name in "abcd")
    assert timed["a"] == pytest.approx(np.median(timed.samples["a"]))
    assert len(calls) == 6 * 4 * (1 + profile.SETTLE_CALLS) and profile.SETTLE_CALLS == 1
    assert calls[0::2] == calls[1::2]  # each function settles, then is timed
    calls = calls[1::2]
    orders = [tuple(calls[i : i + 4]) for i in range(0, 24, 4)]
    assert all(sorted(o) == list("abcd") for o in orders)
    # not a rotation of one order: some round starts with a function at a different offset
    rotations = {tuple("abcd"[i:] + "abcd"[:i]) for i in range(4)}
    assert any(o not in rotations for o in orders)
    del calls[:]  # the list the functions append to
    again = []
    functions = {n: (lambda n=n: again.append(n)) for n in "abcd"}
    profile.median_times(functions, [], budget_s=0.0)
    again = again[1::2]
    assert [tuple(again[i : i + 4]) for i in range(0, 24, 4)] == orders  # seeded
