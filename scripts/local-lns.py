#!/usr/bin/env python3
"""How far local generalization with k-anonymity can go, by integer programming outside deid
(docs/benchmarks.md, "Local generalization"):

    python3 scripts/local-lns.py DIR NAME REGION [--k 5] [--candidates 24] [--slack 0.5]
        [--passes fine:10,fine3:30,fine:60,coarse:90,coarse:90,mixed:60,mixed:60] [--seed 0]

DIR holds NAME.csv and NAME_hierarchy_<column>.csv (ARX's benchmark layout, `;`-separated, every
column a quasi-identifier). Scores are the post-hoc granularity utility deid reports (1 − the
mean over cells of the domain share normalized between 1/domain size and 1; a suppressed record
counts 1 in every cell). Steps, each printed with its utility:

1. the sweep (deid's `--local-method sweep`): transformations in order of their mean normalized
   share, ties by the sum of levels, then the levels; each publishes the classes of at least k
   records among those not yet published;
2. candidate classes: every record's first CANDIDATES transformations, in that order, where its
   class in the whole table holds at least k records and its cost is at most the sweep's + SLACK,
   and the sweep's own class;
3. passes of a large-neighbourhood search with HiGHS: a neighbourhood's records are freed, every
   other record keeps its class, a class keeping members from outside must still hold k records,
   and the neighbourhood's program (every record in one candidate class or suppressed, every
   class used holding k records) is solved from the current assignment within the pass's limit
   in seconds. REGION is the column that cuts the table into neighbourhoods: `fine` frees the
   records of one value of its third-highest level (cup's ZIP: the first two digits), `fine3`
   random groups of three such regions, `coarse` per value of its second-highest level the
   records whose class keeps that level or less, `mixed` random groups of fine regions within
   one coarse region of about 3,000 records.

Needs numpy and highspy (`pip install numpy highspy`). The final assignment is checked by
recounting every class from the records' generalized values. Not a test: it takes about 1.5 h on
cup with the default passes.
"""
import argparse
import collections
import itertools
import random
import sys
import time

import highspy
import numpy as np


def load(directory, name):
    with open(f"{directory}/{name}.csv", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    header = lines[0].split(";")
    rows = [line.split(";") for line in lines[1:]]
    attrs = []
    for j, column in enumerate(header):
        with open(f"{directory}/{name}_hierarchy_{column}.csv", encoding="utf-8") as f:
            hier = [line.rstrip("\n").split(";") for line in f if line.strip()]
        leaf = {h[0]: i for i, h in enumerate(hier)}
        total = len(hier)
        codes, shares = [], []
        for level in range(len(hier[0])):
            covered = collections.Counter(h[level] for h in hier)
            ids = {}
            c = np.empty(len(rows), dtype=np.int64)
            s = np.empty(len(rows))
            for r, row in enumerate(rows):
                value = hier[leaf[row[j]]][level]
                c[r] = ids.setdefault(value, len(ids))
                s[r] = (covered[value] - 1) / (total - 1)
            codes.append(c)
            shares.append(s)
        attrs.append({"name": column, "codes": codes, "shares": shares,
                      "bits": max(int(c.max()) for c in codes).bit_length()})
    return header, len(rows), attrs


def transformations(attrs):
    means = [[float(s.mean()) for s in a["shares"]] for a in attrs]
    ts = list(itertools.product(*[range(len(a["codes"])) for a in attrs]))
    ts.sort(key=lambda t: (sum(means[i][l] for i, l in enumerate(t)), sum(t), t))
    return ts, [sum(means[i][l] for i, l in enumerate(t)) for t in ts]


def keys(attrs, t, index=None):
    k = 0
    for a, level in zip(attrs, t):
        c = a["codes"][level] if index is None else a["codes"][level][index]
        k = (k << a["bits"]) | c
    return k


def cost(attrs, t, index=None):
    return sum(a["shares"][level] if index is None else a["shares"][level][index]
               for a, level in zip(attrs, t))


def sweep(attrs, n, ts, k):
    at = np.full(n, -1)
    rem = np.arange(n)
    for ti, t in enumerate(ts):
        if len(rem) == 0:
            break
        _, inv, cnt = np.unique(keys(attrs, t, rem), return_inverse=True, return_counts=True)
        take = cnt[inv] >= k
        at[rem[take]] = ti
        rem = rem[~take]
    return at


def candidates(attrs, n, ts, tcost, greedy, gcost, k, per_record, slack):
    cands = [[] for _ in range(n)]
    classes = {}
    taken = np.zeros(n, dtype=np.int64)
    full = np.zeros(n, dtype=bool)
    for ti, t in enumerate(ts):
        if full.all():
            break
        key = keys(attrs, t)
        _, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
        rcost = cost(attrs, t)
        mine = greedy == ti
        take = ~full & (cnt[inv] >= k) & (((taken < per_record) & (rcost <= gcost + slack)) | mine)
        for r in np.nonzero(take)[0]:
            cid = classes.setdefault((ti, int(key[r])), len(classes))
            cands[r].append((cid, float(rcost[r])))
        taken += take
        passed = (greedy < 0) | (greedy <= ti)
        later = tcost[ti + 1] if ti + 1 < len(ts) else float("inf")
        full |= passed & ((taken >= per_record) | (later > gcost + slack + 0.3))
    return cands, classes


class Search:
    def __init__(self, n, q, k, cands, start):
        self.n, self.q, self.k, self.cands = n, q, k, cands
        self.suppressed = float(q)
        self.members = collections.defaultdict(list)
        for r in range(n):
            for c, _ in cands[r]:
                self.members[c].append(r)
        self.cur = list(start)
        self.cnt = collections.Counter(c for c in self.cur if c >= 0)
        self.cost_of = [dict(cands[r]) for r in range(n)]
        self.total = sum(self.rcost(r, self.cur[r]) for r in range(n))

    def rcost(self, r, c):
        return self.cost_of[r][c] if c >= 0 else self.suppressed

    def utility(self):
        return 1 - self.total / (self.q * self.n)

    def solve(self, free, limit):
        free_set = set(free)
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", limit)
        inf = highspy.kHighsInf
        col, obj, var = 0, [], {}
        for r in free:
            for c, w in self.cands[r] + [(-1, self.suppressed)]:
                var[(r, c)] = col
                obj.append(w)
                col += 1
        used = {c for r in free for c, _ in self.cands[r]}
        fixed = {c: self.cnt[c] - sum(1 for r in self.members[c] if r in free_set and self.cur[r] == c)
                 for c in used}
        opened = {}
        for c in used:
            if fixed[c] == 0:
                opened[c] = col
                obj.append(0.0)
                col += 1
        h.addVars(col, np.zeros(col), np.ones(col))
        h.changeColsCost(col, np.arange(col, dtype=np.int32), np.array(obj))
        h.changeColsIntegrality(col, np.arange(col, dtype=np.int32),
                                np.array([highspy.HighsVarType.kInteger] * col))
        for r in free:
            idx = [var[(r, c)] for c, _ in self.cands[r]] + [var[(r, -1)]]
            h.addRow(1, 1, len(idx), np.array(idx, dtype=np.int32), np.ones(len(idx)))
        for c in used:
            idx = [var[(r, c)] for r in self.members[c] if r in free_set]
            if c in opened:
                y = opened[c]
                h.addRow(0, inf, len(idx) + 1, np.array(idx + [y], dtype=np.int32),
                         np.array([1.0] * len(idx) + [-float(self.k)]))
                for i in idx:
                    h.addRow(0, inf, 2, np.array([y, i], dtype=np.int32), np.array([1.0, -1.0]))
            elif fixed[c] < self.k:
                h.addRow(self.k - fixed[c], inf, len(idx), np.array(idx, dtype=np.int32),
                         np.ones(len(idx)))
        start = np.zeros(col)
        for r in free:
            start[var[(r, self.cur[r])]] = 1
            if self.cur[r] in opened:
                start[opened[self.cur[r]]] = 1
        sol = highspy.HighsSolution()
        sol.col_value = list(start)
        sol.value_valid = True
        h.setSolution(sol)
        h.run()
        if h.getInfo().primal_solution_status != 2:
            return 0.0
        value = h.getSolution().col_value
        new = {r: c for r in free for c, _ in self.cands[r] + [(-1, 0)] if value[var[(r, c)]] > 0.5}
        old_cost = sum(self.rcost(r, self.cur[r]) for r in free)
        new_cost = sum(self.rcost(r, new[r]) for r in free)
        if new_cost >= old_cost - 1e-6:
            return 0.0
        for r in free:
            if self.cur[r] >= 0:
                self.cnt[self.cur[r]] -= 1
            self.cur[r] = new[r]
            if new[r] >= 0:
                self.cnt[new[r]] += 1
        self.total += new_cost - old_cost
        return old_cost - new_cost


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("name")
    p.add_argument("region")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--candidates", type=int, default=24)
    p.add_argument("--slack", type=float, default=0.5)
    p.add_argument("--passes", default="fine:10,fine3:30,fine:60,coarse:90,coarse:90,mixed:60,mixed:60")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    passes = []
    for spec in args.passes.split(","):
        mode, _, limit = spec.partition(":")
        if mode not in ("fine", "fine3", "coarse", "mixed"):
            sys.exit(f"--passes: {spec!r}: expected fine, fine3, coarse or mixed before the ':'")
        try:
            passes.append((spec, mode, float(limit)))
        except ValueError:
            sys.exit(f"--passes: {spec!r}: expected a time limit in seconds after the ':'")
    t0 = time.time()
    header, n, attrs = load(args.dir, args.name)
    q = len(attrs)
    ts, tcost = transformations(attrs)
    greedy = sweep(attrs, n, ts, args.k)
    gcost = np.array([cost(attrs, ts[g], r) if g >= 0 else q for r, g in enumerate(greedy)])
    print(f"sweep: utility {1 - gcost.sum() / (q * n):.6f}, {int((greedy < 0).sum())} suppressed "
          f"({time.time() - t0:.0f} s)", flush=True)
    cands, classes = candidates(attrs, n, ts, tcost, greedy, gcost, args.k, args.candidates, args.slack)
    by_class = {v: key for key, v in classes.items()}
    start = []
    for r, g in enumerate(greedy):
        start.append(-1 if g < 0 else classes[(g, int(keys(attrs, ts[g], r)))])
    print(f"candidates: {len(classes)} classes, {sum(map(len, cands))} memberships "
          f"({time.time() - t0:.0f} s)", flush=True)
    s = Search(n, q, args.k, cands, start)
    region = header.index(args.region)
    levels = attrs[region]["codes"]
    fine, coarse = levels[len(levels) - 3], levels[len(levels) - 2]
    by_fine = collections.defaultdict(list)
    for r in range(n):
        by_fine[int(fine[r])].append(r)
    rng = random.Random(args.seed)
    for number, (spec, mode, limit) in enumerate(passes, 1):
        groups = []
        if mode in ("fine", "fine3"):
            regions = list(by_fine)
            rng.shuffle(regions)
            size = 1 if mode == "fine" else 3
            groups = [[r for z in regions[i:i + size] for r in by_fine[z]]
                      for i in range(0, len(regions), size)]
        elif mode == "coarse":
            by_coarse = collections.defaultdict(list)
            for r in range(n):
                c = s.cur[r]
                if c >= 0 and ts[by_class[c][0]][region] >= len(levels) - 2:
                    by_coarse[int(coarse[r])].append(r)
            groups = list(by_coarse.values())
            rng.shuffle(groups)
        elif mode == "mixed":
            within = collections.defaultdict(list)
            for z, members in by_fine.items():
                within[int(coarse[members[0]])].append(z)
            for zs in within.values():
                rng.shuffle(zs)
                group = []
                for z in zs:
                    group += by_fine[z]
                    if len(group) >= 3000:
                        groups.append(group)
                        group = []
                if group:
                    groups.append(group)
        t1 = time.time()
        for group in groups:
            s.solve(group, limit)
        print(f"pass {number} ({spec}, {len(groups)} neighbourhoods): utility {s.utility():.6f}, "
              f"{sum(1 for c in s.cur if c < 0)} suppressed ({time.time() - t1:.0f} s)", flush=True)
    # Independent check: recount the classes from the records' generalized values.
    count = collections.Counter()
    for r, c in enumerate(s.cur):
        if c >= 0:
            ti, key = by_class[c]
            assert keys(attrs, ts[ti], r) == key
            count[(ti, key)] += 1
    small = sum(1 for v in count.values() if v < args.k)
    print(f"final: utility {s.utility():.6f}, {len(count)} classes, {small} under k", flush=True)


if __name__ == "__main__":
    main()
