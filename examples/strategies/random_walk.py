#!/usr/bin/env python3
"""An external heddle strategy: a seeded random walk that avoids spinners.

Run it with `heddle fuzz TARGET --strategy exec:./examples/strategies/random_walk.py`.
It speaks heddle's line-delimited JSON protocol (see the README, "External
strategies"): one request per line on stdin, one reply per line on stdout
for `thread` and `value` requests. Everything it decides follows from the
seed of the last `reset` and the requests since, so runs are reproducible.

For the tests it also misbehaves on request: with HEDDLE_TEST_MISBEHAVE set
to `crash`, `garbage` or `bad-tid` it dies, prints a line that is not JSON,
or names a thread that is not a candidate, at its third thread decision.
"""
import json
import os
import random
import sys

MISBEHAVE = os.environ.get("HEDDLE_TEST_MISBEHAVE", "")


def main():
    rng = random.Random(0)
    for line in sys.stdin:
        msg = json.loads(line)
        kind = msg["type"]
        if kind == "reset":
            rng = random.Random(msg["seed"])
        elif kind == "thread":
            if msg["decision"] == 2 and MISBEHAVE:
                if MISBEHAVE == "crash":
                    sys.stderr.write("random_walk.py: crashing on purpose\n")
                    sys.exit(3)
                if MISBEHAVE == "garbage":
                    print("this is not json", flush=True)
                    continue
                if MISBEHAVE == "bad-tid":
                    print(json.dumps({"tid": 999}), flush=True)
                    continue
            cands = msg["candidates"]
            awake = [c for c in cands if not c["spinning"]] or cands
            choice = awake[rng.randrange(len(awake))]
            print(json.dumps({"tid": choice["tid"]}), flush=True)
        elif kind == "value":
            print(json.dumps({"value": rng.randrange(msg["n"])}), flush=True)
        # hello and spawn need no reply


if __name__ == "__main__":
    main()
