#!/usr/bin/env python3
"""Paired comparison of two rankings on the same requests (decision 0056).

    TOOL_EVAL_PER_REQUEST=FILE cargo run ... --example tool_eval -- POOL QUERIES [MODEL_DIR]
    python3 bench/search-eval/paired.py FILE BASE CANDIDATE [--ranking hybrid]
    python3 bench/search-eval/paired.py BASE_FILE:BASE CANDIDATE_FILE:CANDIDATE
    (--half dev or --half test: only LiveMCPBench's old halves, for comparison with 0038-0052)

BASE and CANDIDATE name an evidence row of `tool_eval` ("shipped", "request map (decision
0052, not adopted)", "custom ...") or, with FILE:NAME, a row of another run's file (another
model directory, another build). A prefix of the name is enough when it is unique.

For each of the five measures (recall@5, @10, @20, all@10, all@20) and their sum, prints
the mean of the per-request differences (candidate minus base), a 90 % interval from a
bootstrap over requests (10,000 resamples, fixed seed, so the output is reproducible),
and how many requests the candidate's sum wins, loses and ties. The requests are paired:
a request counts only when both rows have it.

Rule used from decision 0056 on: a change chosen on the development set (all of
LiveMCPBench) goes on to be read on the held-out sets only when the 90 % interval of the
summed difference lies above zero on the development set.
"""

import json
import random
import sys

MEASURES = ["recall@5", "recall@10", "recall@20", "all@10", "all@20"]
RESAMPLES = 10_000
SEED = 56


def load(path, ranking, half):
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if half is not None and row["dev_half"] != (half == "dev"):
                    continue
                if row["ranking"] == ranking:
                    rows.setdefault(row["evidence"], {})[row["id"]] = row["measures"]
    return rows


def pick(rows, name, path):
    if name in rows:
        return rows[name]
    found = [e for e in rows if e.startswith(name)]
    if len(found) != 1:
        sys.exit(f"{path}: evidence {name!r} matches {found or 'nothing'}; have {sorted(rows)}")
    return rows[found[0]]


def interval(diffs, rng):
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(RESAMPLES))
    return means[int(0.05 * RESAMPLES)], means[int(0.95 * RESAMPLES) - 1]


def main(argv):
    options = {"--ranking": "hybrid", "--half": None}
    for option in options:
        if option in argv:
            i = argv.index(option)
            options[option] = argv[i + 1]
            argv = argv[:i] + argv[i + 2 :]
    ranking, half = options["--ranking"], options["--half"]
    if len(argv) == 3:
        path, base_name, cand_name = argv
        base_path = cand_path = path
    elif len(argv) == 2 and ":" in argv[0] and ":" in argv[1]:
        (base_path, base_name), (cand_path, cand_name) = (a.split(":", 1) for a in argv)
    else:
        sys.exit(__doc__)
    base = pick(load(base_path, ranking, half), base_name, base_path)
    cand = pick(load(cand_path, ranking, half), cand_name, cand_path)
    ids = sorted(set(base) & set(cand))
    if not ids:
        sys.exit("no request is in both rows")
    which = f", {half} half" if half else ""
    print(f"{ranking}{which}: {cand_name!r} minus {base_name!r}, {len(ids)} paired requests")
    print("| measure | base | candidate | difference | 90 % interval |")
    print("|---|---:|---:|---:|---:|")
    rng = random.Random(SEED)
    columns = [(m, i) for i, m in enumerate(MEASURES)] + [("sum of the five", None)]
    for name, i in columns:
        def value(row):
            return sum(row) if i is None else row[i]

        b = [value(base[q]) for q in ids]
        c = [value(cand[q]) for q in ids]
        diffs = [y - x for x, y in zip(b, c)]
        lo, hi = interval(diffs, rng)
        n = len(ids)
        print(
            f"| {name} | {sum(b) / n:.3f} | {sum(c) / n:.3f} | {sum(diffs) / n:+.3f} "
            f"| {lo:+.3f} to {hi:+.3f} |"
        )
    sums = [sum(cand[q]) - sum(base[q]) for q in ids]
    wins = sum(d > 1e-9 for d in sums)
    losses = sum(d < -1e-9 for d in sums)
    print(f"requests: {wins} better, {losses} worse, {len(ids) - wins - losses} the same (sum)")


if __name__ == "__main__":
    main(sys.argv[1:])
