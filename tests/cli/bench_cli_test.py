"""hearth bench on a synthetic model: it starts its own hearthd (--model), prints the three
tables, writes an SVG that parses back with one chart per measurement, and --json gives
the raw figures. Only the shape of the output is checked: no figure is asserted."""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HANG_GUARD_S = 600  # a hang guard, as in tests/e2e/hearthd_process.py; not a time bound


def main():
    hearth, hearthd, make_synthetic = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "synthetic.gguf")
        subprocess.run([make_synthetic, "--out", model, "--type", "q8_0"], check=True, timeout=HANG_GUARD_S)
        svg = os.path.join(tmp, "bench.svg")
        common = [hearth, "bench", "--model", model, "--hearthd", hearthd,
                  "--hearthd-arg=--chat-template", "--hearthd-arg=chatml", "--hearthd-arg=--ctx",
                  "--hearthd-arg=1024", "--hearthd-arg=--threads", "--hearthd-arg=2",
                  "--lengths", "32,128", "--contexts", "32,200", "--streams", "1,2", "--tokens", "6"]
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"))  # the peaks' cache folder
        out = subprocess.run(common + ["--plot", svg], capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)
        print(out.stdout)
        print(out.stderr)
        assert out.returncode == 0, out.returncode
        for title in ("TTFT against prompt length", "ITL against context length",
                      "Aggregate throughput against concurrent streams", "Against this machine's peaks",
                      "GOP/s", "GB/s"):
            assert title in out.stdout, title
        # Two prompt lengths with all three tiers (the private daemon restarted for disk).
        ttft_rows = out.stdout.split("ITL against")[0].strip().splitlines()[2:]
        assert len(ttft_rows) == 2, ttft_rows
        for line in ttft_rows:
            cells = line.split()
            assert len(cells) == 4 and "-" not in cells, line
        assert "[1/" in out.stderr  # progress

        root = ET.parse(svg).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        assert root.tag == ns + "svg", root.tag
        charts = root.findall(ns + "g")
        assert len(charts) == 3, len(charts)
        for g in charts:
            assert g.findall(ns + "polyline"), ET.tostring(g)[:200]
        titles = [g.find(ns + "text").text for g in charts]
        assert titles == ["TTFT vs prompt length", "ITL vs context length", "Throughput vs streams"], titles

        out = subprocess.run(common + ["--json"], capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)
        assert out.returncode == 0, out.stderr
        figures = json.loads(out.stdout)
        assert [r["streams"] for r in figures["streams"]] == [1, 2]
        assert all(r["tok_s"] > 0 for r in figures["streams"])
        assert len(figures["itl"]) == 2 and len(figures["ttft"]) == 2
        assert figures["peaks"]["int8_gops"] > 0 and figures["peaks"]["read_gb_s"] > 0
        assert figures["peaks"]["cached"]  # measured by the first run, kept in the cache folder
        assert figures["ttft"][-1]["cold"]["prefill_gops"] > 0
        assert figures["itl"][0]["decode_gb_s"] > 0
        for r in figures["ttft"]:
            # Cold: only a few leading tokens (BOS, a digit) may be shared with an earlier prompt.
            assert r["cold"]["cached_tokens"] <= r["tokens"] // 4, r
            assert r["memory"]["cached_tokens"] > r["cold"]["cached_tokens"], r
            assert r["memory"]["cached_tokens"] > 0, r
            assert r["disk"]["cached_tokens"] > 0, r
    print("ok")


if __name__ == "__main__":
    main()
