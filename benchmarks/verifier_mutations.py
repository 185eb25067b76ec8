"""How often the finite-field verifier accepts a wrong μGraph.

Two corpora, each pair (reference, candidate) judged first by float64 evaluation and then by
`mj.verify_equivalent(reference, candidate)`:

- random single mutations of the paper's hand-written μGraphs (an op kind, a scalar, a
  reduce dim or kind, an accumulator kind, an imap, fmap or omap, operand order, a bypassed
  op), at the programs' small shapes;
- small identities and non-identities named in the verifier's issues (shrinking and size
  constants, square roots of products, division, unstabilized softmax, relu and max rules).

A pair is *wrong* when float64 evaluation tells the graphs apart on some input: standard
normal values (negative ones included), the same with a quarter of them zero, or scaled by
10^4 (exp overflows, a fully underflowed row divides 0 by 0); NaN and inf positions count.
Prints `wrong accepted / wrong tried` and, for pairs float64 cannot tell apart, how many the
verifier rejects (false rejects, or safety rejects where the inputs tried are not extreme
enough to show the difference).

    PYTHONPATH=. python benchmarks/verifier_mutations.py [--per-program 40] [--seed 0] [-v]
"""

from __future__ import annotations

import argparse
import json
import random
import sys

import numpy as np

import mirage_jax as mj
from mirage_jax.ir import paper_graphs

_UNARY = [
    "exp",
    "square",
    "sqrt",
    "rsqrt",
    "silu",
    "gelu",
    "relu",
    "sigmoid",
    "neg",
    "recip",
]
_BINARY = ["add", "sub", "mul", "div"]
_ACCUMS = [
    "accum_sum",
    "accum_sum_last",
    "accum_mean_last",
    "accum_rms_last",
    "accum_max_last",
    "accum_exp_sum_last",
]
_SCALES = [0.0, -1.0, 2.0, 0.5, 1.0 + 2.0**-20]


# ------------------------------------------------------------------------ float64 judgement


def _input_sets(kg, rng):
    normal = [rng.standard_normal(t.shape) for t in kg.inputs]
    zeros = [np.where(rng.random(x.shape) < 0.25, 0.0, x) for x in normal]
    large = [x * 1e4 for x in normal]
    return [normal, zeros, large]


def _same(a, b) -> bool:
    if a.shape != b.shape:
        return False
    if not (np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isinf(a), np.isinf(b))):
        return False
    finite = np.isfinite(a)
    if not np.array_equal(a[~finite & ~np.isnan(a)], b[~finite & ~np.isnan(b)]):
        return False  # +inf against -inf
    return np.allclose(a[finite], b[finite], rtol=1e-7, atol=1e-9)


def float64_differ(ref, cand, rng) -> bool | None:
    """True when some input set tells them apart; None when either cannot be evaluated."""
    with np.errstate(all="ignore"):
        for inputs in _input_sets(ref, rng):
            try:
                ya = ref.evaluate(inputs)
                yb = cand.evaluate(inputs)
            except (mj.IRError, ValueError, TypeError):
                return None
            if any(not _same(np.asarray(a), np.asarray(b)) for a, b in zip(ya, yb)):
                return True
    return False


# ----------------------------------------------------------------------- random mutations


def _ops_of(doc):
    """Every (op list, op) pair of the document, block graphs included."""
    found = [(doc["ops"], op) for op in doc["ops"]]
    for op in doc["ops"]:
        if op["kind"] == "customized":
            found += [(op["block_graph"]["ops"], b) for b in op["block_graph"]["ops"]]
    return found


def _bypass(ops, op, i):
    (dropped,) = op["outputs"]
    kept = op["inputs"][i]
    ops.remove(op)
    for o in ops:
        if "inputs" in o:
            o["inputs"] = [kept if t == dropped else t for t in o["inputs"]]


def _mutate_op(ops, op, r: random.Random) -> str | None:
    kind = op["kind"]
    if kind in _UNARY:
        if r.random() < 0.3:
            _bypass(ops, op, 0)
            return f"bypass {kind}"
        op["kind"] = r.choice([k for k in _UNARY if k != kind])
        return f"{kind} -> {op['kind']}"
    if kind in _BINARY:
        choice = r.random()
        if choice < 0.3:
            op["inputs"].reverse()
            return f"swap {kind}"
        if choice < 0.5:
            i = r.randrange(2)
            _bypass(ops, op, i)
            return f"bypass {kind} keeping input {i}"
        op["kind"] = r.choice([k for k in _BINARY if k != kind])
        return f"{kind} -> {op['kind']}"
    if kind in ("mul_scalar", "add_scalar", "rms_norm", "accum_rms_last"):
        old = op["scalar"]
        op["scalar"] = old * r.choice(_SCALES) if old else r.choice([1.0, -1.0, 0.5])
        return f"{kind} scalar {old} -> {op['scalar']}"
    if kind == "matmul":
        op["inputs"].reverse()
        return "swap matmul"
    if kind == "reduce":
        if r.random() < 0.5:
            old = op["reduce_kind"]
            op["reduce_kind"] = r.choice([k for k in ("sum", "mean", "max") if k != old])
            return f"reduce {old} -> {op['reduce_kind']}"
        op["dim"] = r.randrange(0, 4)
        return f"reduce dim -> {op['dim']}"
    if kind in _ACCUMS:
        op["kind"] = r.choice([k for k in _ACCUMS if k != kind])
        if op["kind"] == "accum_rms_last":
            op["scalar"] = 1e-6
        else:
            op.pop("scalar", None)
        return f"{kind} -> {op['kind']}"
    if kind == "input" and "imap" in op:
        if r.random() < 0.5:
            imap = list(op["imap"])
            r.shuffle(imap)
            op["imap"] = imap
            return f"imap -> {imap}"
        op["fmap"] = r.choice([-1, 0, 1, 2])
        return f"fmap -> {op['fmap']}"
    if kind == "output" and "omap" in op:
        omap = list(op["omap"])
        r.shuffle(omap)
        op["omap"] = omap
        return f"omap -> {omap}"
    if kind == "customized":
        inputs = list(op["inputs"])
        r.shuffle(inputs)
        op["inputs"] = inputs
        return "permute customized inputs"
    return None


def random_mutant(fused, r: random.Random):
    """A valid graph with one op changed (and what changed), or None."""
    doc = json.loads(fused.to_json())
    candidates = [
        (ops, op) for ops, op in _ops_of(doc) if op["kind"] not in ("output",) or "omap" in op
    ]
    ops, op = r.choice(candidates)
    what = _mutate_op(ops, op, r)
    if what is None:
        return None
    try:
        return mj.KernelGraph.from_json(json.dumps(doc)), what
    except (mj.IRError, ValueError, TypeError, KeyError):
        return None


# --------------------------------------------------------------------- named (non-)identities


def _graph(shapes, body):
    g = mj.KernelGraph()
    xs = [g.new_input(s, "float32") for s in shapes]
    g.mark_output(body(g, *xs))
    return g


def _softmax_stable(g, x):
    e = g.exp(g.sub(x, g.reduce(x, -1, "max")))
    return g.div(e, g.reduce(e, -1, "sum"))


def _softmax_plain(g, x):
    e = g.exp(x)
    return g.div(e, g.reduce(e, -1, "sum"))


def _softmax_global_max(g, x):
    m = g.reduce(g.reduce(x, -1, "max"), -2, "max")
    e = g.exp(g.sub(x, m))
    return g.div(e, g.reduce(e, -1, "sum"))


def _softmax_block(shape, stabilized: bool):
    """One block per row group: exp (after the row max when stabilized) over whole rows."""
    g = mj.KernelGraph()
    x = g.new_input(shape, "float32")
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    t = bg.new_input(x, imap=(0, -1, -1), fmap=-1)
    if stabilized:
        t = bg.sub(t, bg.reduce(t, -1, "max"))
    e = bg.exp(t)
    bg.new_output(bg.div(e, bg.reduce(e, -1, "sum")), omap=(0, -1, -1))
    (y,) = g.customized([x], bg)
    g.mark_output(y)
    return g


def _old_split_kv(heads=2, q_len=8, kv_len=32, head_dim=4, kv_splits=2, forloop=2):
    """The split-KV μGraph as the paper writes it: exp(scale·Q·K) without any max."""
    scale = 1.0 / np.sqrt(head_dim)
    fused = mj.KernelGraph()
    Q = fused.new_input((heads, q_len, head_dim), "float32")
    K = fused.new_input((heads, head_dim, kv_len), "float32")
    V = fused.new_input((heads, kv_len, head_dim), "float32")
    bg = mj.BlockGraph(grid=(heads, kv_splits, 1), forloop_range=forloop)
    q = bg.new_input(Q, imap=(0, -1, -1), fmap=-1)
    k = bg.new_input(K, imap=(0, 2, -1), fmap=2)
    v = bg.new_input(V, imap=(0, 1, -1), fmap=1)
    e = bg.exp(bg.mul_scalar(bg.matmul(q, k), scale))
    bg.new_output(bg.accum_sum(bg.matmul(e, v)), omap=(0, 2, -1))
    bg.new_output(bg.accum_sum_last(e), omap=(0, 2, -1))
    ev, sums = fused.customized([Q, K, V], bg)
    cb = mj.BlockGraph(grid=(heads, 1, 1), forloop_range=kv_splits)
    a = cb.new_input(ev, imap=(0, -1, -1), fmap=2)
    b = cb.new_input(sums, imap=(0, -1, -1), fmap=2)
    cb.new_output(cb.div(cb.accum_sum(a), cb.accum_sum_last(b)), omap=(0, -1, -1))
    (y,) = fused.customized([ev, sums], cb)
    fused.mark_output(y)

    ref = mj.KernelGraph()
    Q = ref.new_input((heads, q_len, head_dim), "float32")
    K = ref.new_input((heads, head_dim, kv_len), "float32")
    V = ref.new_input((heads, kv_len, head_dim), "float32")
    s = ref.mul_scalar(ref.matmul(Q, K), scale)
    ref.mark_output(ref.matmul(_softmax_stable(ref, s), V))
    return ref, fused


def named_pairs():
    """(name, reference, candidate, shrink) for the issues' cases."""
    xy = [(4, 8), (4, 8)]
    big = [(256, 512)]  # large enough for shrink="auto" to shrink
    pairs = [
        (
            "mean vs sum*0.5 (shrunk)",
            _graph(big, lambda g, x: g.reduce(x, -1, "mean")),
            _graph(big, lambda g, x: g.mul_scalar(g.reduce(x, -1, "sum"), 0.5)),
            "auto",
        ),
        (
            "sqrt(x*y) vs sqrt(x)*sqrt(y)",
            _graph(xy, lambda g, x, y: g.sqrt(g.mul(x, y))),
            _graph(xy, lambda g, x, y: g.mul(g.sqrt(x), g.sqrt(y))),
            "auto",
        ),
        (
            "rsqrt(x*y) vs rsqrt(x)*rsqrt(y)",
            _graph(xy, lambda g, x, y: g.rsqrt(g.mul(x, y))),
            _graph(xy, lambda g, x, y: g.mul(g.rsqrt(x), g.rsqrt(y))),
            "auto",
        ),
        (
            "sqrt(x/y) vs sqrt(x)/sqrt(y)",
            _graph(xy, lambda g, x, y: g.sqrt(g.div(x, y))),
            _graph(xy, lambda g, x, y: g.div(g.sqrt(x), g.sqrt(y))),
            "auto",
        ),
        (
            "x vs x*y/y",
            _graph(xy, lambda g, x, y: g.add(x, g.mul_scalar(y, 0.0))),
            _graph(xy, lambda g, x, y: g.div(g.mul(x, y), y)),
            "auto",
        ),
        (
            "x*y/y vs x",
            _graph(xy, lambda g, x, y: g.div(g.mul(x, y), y)),
            _graph(xy, lambda g, x, y: g.add(x, g.mul_scalar(y, 0.0))),
            "auto",
        ),
        (
            "softmax vs exp(x)/sum(exp(x))",
            _graph([(4, 8)], _softmax_stable),
            _graph([(4, 8)], _softmax_plain),
            "auto",
        ),
        (
            "softmax vs block-level exp(x)/sum(exp(x))",
            _graph([(4, 8)], _softmax_stable),
            _softmax_block((4, 8), stabilized=False),
            "auto",
        ),
        (
            "softmax vs exp(x - global max)/sum",
            _graph([(4, 8)], _softmax_stable),
            _graph([(4, 8)], _softmax_global_max),
            "auto",
        ),
        ("attention vs split-KV without max", *_old_split_kv(), "auto"),
    ]
    # Identities that hold for every input (NaN positions included).
    identities = [
        (
            "relu(x) - relu(-x) vs x",
            _graph([(4, 8)], lambda g, x: g.sub(g.relu(x), g.relu(g.neg(x)))),
            _graph([(4, 8)], lambda g, x: g.add(x, g.mul_scalar(x, 0.0))),
            "auto",
        ),
        (
            "max(x+1) vs max(x)+1",
            _graph([(4, 8)], lambda g, x: g.reduce(g.add_scalar(x, 1.0), -1, "max")),
            _graph([(4, 8)], lambda g, x: g.add_scalar(g.reduce(x, -1, "max"), 1.0)),
            "auto",
        ),
        (
            "mean vs sum*(1/n) (shrunk)",
            _graph(big, lambda g, x: g.reduce(x, -1, "mean")),
            _graph(big, lambda g, x: g.mul_scalar(g.reduce(x, -1, "sum"), 1.0 / 512)),
            "auto",
        ),
        (
            "softmax vs block-level stabilized softmax",
            _graph([(4, 8)], _softmax_stable),
            _softmax_block((4, 8), stabilized=True),
            "auto",
        ),
    ]
    return pairs, identities


# ----------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--per-program",
        type=int,
        default=40,
        help="random mutants tried per paper program",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    r = random.Random(args.seed)
    rng = np.random.default_rng(args.seed)

    paper_wrong = paper_accepted = 0
    for name in sorted(paper_graphs.PROGRAMS):
        program = paper_graphs.PROGRAMS[name]
        ref, fused = program.build(**program.small)
        differ = bool(float64_differ(ref, fused, rng))
        verdict = mj.verify_equivalent(ref, fused)
        paper_wrong += differ
        paper_accepted += differ and bool(verdict)
        print(
            f"  paper graph {name}: float64 {'differs' if differ else 'equal'}; verifier "
            f"{'ACCEPTED' if verdict else 'rejected'}"
        )
    print(
        f"the paper's fused graphs themselves: wrong accepted {paper_accepted} / wrong tried "
        f"{paper_wrong}"
    )

    wrong_tried = wrong_accepted = same_tried = same_rejected = 0
    for name in sorted(paper_graphs.PROGRAMS):
        program = paper_graphs.PROGRAMS[name]
        ref, fused = program.build(**program.small)
        made = 0
        attempts = 0
        while made < args.per_program and attempts < 20 * args.per_program:
            attempts += 1
            mutant = random_mutant(fused, r)
            if mutant is None:
                continue
            graph, what = mutant
            if graph.hash() == fused.hash():
                continue  # the change changed nothing (a shuffle back into the same order)
            differ = float64_differ(ref, graph, rng)
            if differ is None:
                continue
            made += 1
            accepted = bool(mj.verify_equivalent(ref, graph))
            if differ:
                wrong_tried += 1
                wrong_accepted += accepted
                if accepted:
                    print(f"WRONG ACCEPTED: {name}: {what}")
            else:
                same_tried += 1
                same_rejected += not accepted
                if args.verbose and not accepted:
                    print(f"rejected, float64 cannot tell apart: {name}: {what}")
    print(
        f"random mutants of the paper graphs: wrong accepted {wrong_accepted} / wrong tried "
        f"{wrong_tried}; float64-equal mutants rejected {same_rejected} / {same_tried}"
    )

    pairs, identities = named_pairs()
    named_wrong = named_accepted = 0
    for label, ref, cand, shrink in pairs:
        differ = float64_differ(ref, cand, rng)
        verdict = mj.verify_equivalent(ref, cand, shrink=shrink)
        named_wrong += bool(differ)
        named_accepted += bool(differ) and bool(verdict)
        state = "ACCEPTED" if verdict else "rejected"
        print(
            f"  {label}: float64 {'differs' if differ else 'equal'}; verifier {state}"
            + ("" if verdict else f" ({verdict.reason[:110]})")
        )
    print(f"named non-identities: wrong accepted {named_accepted} / wrong tried {named_wrong}")
    false_rejects = 0
    for label, ref, cand, shrink in identities:
        differ = float64_differ(ref, cand, rng)
        verdict = mj.verify_equivalent(ref, cand, shrink=shrink)
        false_rejects += (not differ) and not verdict
        print(
            f"  {label}: float64 {'differs' if differ else 'equal'}; verifier "
            f"{'accepted' if verdict else 'rejected'}"
        )
    print(f"named identities: rejected {false_rejects} / {len(identities)}")
    total_wrong = paper_wrong + wrong_tried + named_wrong
    total_accepted = paper_accepted + wrong_accepted + named_accepted
    print(f"TOTAL wrong accepted / wrong tried: {total_accepted} / {total_wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
