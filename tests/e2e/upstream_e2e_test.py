"""Models served by an upstream (issue 45), with real engines on both sides: a hearthd on a
loopback TCP port is the upstream; a second hearthd on a Unix socket, with an [[upstream]]
pointing at it, is the front every client talks to. Checks that the front lists the
upstream's models, that chat and stream through it equal the upstream's own greedy answers
with hearth's timings measured at the front, that clients at once on local and upstream
models each get the answer they get alone, that each cache scope gets its own cache_salt
upstream (no cross-scope hit) and the same one after the front restarts (run as root, also
for requests from two other real uids: the kernel names the caller; restarted with its
upstream given by --upstream-* flags and HEARTH_UPSTREAM_* variables instead of the file: it
lists and answers the upstream's model the same), that an upstream
killed mid-stream ends the stream with an error event, that a stopped one is a 502 naming
it (then an open circuit: 503, closed again by the background probe once the upstream is
back), and that the front serves its local model throughout.
Through a proxy (fault_proxy.py): the same answers over TLS with a CA made here by the
openssl CLI; a certificate from another CA, an upstream that answers 500 and one that
stalls before its first byte are each retried once on a new connection, then a 502/504
naming the upstream.
With the official ollama and anthropic clients (the test venv; --clients requires them):
Ollama's /api/chat and /api/generate and Anthropic's /v1/messages for the upstream model,
whole and streamed, equal the OpenAI route's answer; a 500 and a stall are 502/504 in each
one's error shape; the fallback answers Ollama's chat; Anthropic's input_tokens (in
message_start too) and Ollama's logprobs (whole and streamed) are those the upstream's own
model gives on the upstream's own routes.
Usage: upstream_e2e_test.py --hearthd PATH [--clients]"""
import argparse
import http.client
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

from fault_proxy import FaultProxy, make_certs
from hearthd_process import (HANG_GUARD_S, OTHER_UIDS, CacheDaemon, Hearthd, free_port, gemma_model_or_skip,
                             long_prompt, open_to_other_users, other_users_args, post_as_user, sse_events)

UPSTREAM_MODEL = "up/gemma3:270m"
LOCAL_MODEL = "gemma3:270m"


def tcp_post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_GUARD_S)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def chat_body(model, stream=False, max_tokens=12, **extra):
    return {"model": model, "messages": [{"role": "user", "content": "Name three colours of the rainbow."}],
            "max_tokens": max_tokens, "temperature": 0, "stream": stream, **extra}


def stream_events(daemon, path, body):
    """The JSON events of a streamed answer through the front, and whether [DONE] ended it."""
    c = daemon.connection()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    assert r.getheader("Content-Type", "").startswith("text/event-stream"), r.getheaders()
    events = list(sse_events(r))
    c.close()
    return [e for e in events if e != "[DONE]"], events[-1:] == ["[DONE]"]


def check_listings(front):
    status, models = front.request("GET", "/v1/models")
    assert status == 200
    by_id = {m["id"]: m for m in json.loads(models)["data"]}
    assert LOCAL_MODEL in by_id, by_id.keys()
    up = by_id[UPSTREAM_MODEL]
    assert up["owned_by"] == "upstream:up" and up["meta"]["upstream"] == "up", up
    status, tags = front.request("GET", "/api/tags")
    assert status == 200 and any(m["name"] == UPSTREAM_MODEL for m in json.loads(tags)["models"])
    status, installed = front.request("GET", "/api/models")
    assert status == 200
    assert UPSTREAM_MODEL in [m["id"] for m in json.loads(installed)["upstream_models"]]
    status, health = front.request("GET", "/health")
    upstreams = json.loads(health)["upstreams"]
    assert upstreams[0]["name"] == "up" and upstreams[0]["state"] == "closed", upstreams
    print("listings: /v1/models, /api/tags, /api/models and /health show the upstream's model")


def check_answers_equal(front, port):
    status, direct = tcp_post(port, "/v1/chat/completions", chat_body(LOCAL_MODEL))
    assert status == 200, direct
    status, via = front.post_json("/v1/chat/completions", chat_body(UPSTREAM_MODEL))
    assert status == 200, via
    want = direct["choices"][0]["message"]["content"]
    assert via["choices"][0]["message"]["content"] == want, (via, direct)
    assert via["model"] == UPSTREAM_MODEL, via["model"]
    assert via["timings"]["upstream"] == "up" and via["timings"]["ttft_ms"] > 0, via["timings"]
    events, done = stream_events(front, "/v1/chat/completions", chat_body(UPSTREAM_MODEL, stream=True))
    assert done, events[-1]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    assert text == want, (text, want)
    final = [e for e in events if e.get("choices") and e["choices"][0].get("finish_reason")]
    assert len(final) == 1, events
    t = final[0]["timings"]
    assert t["upstream"] == "up" and t["ttft_ms"] > 0 and t["decode_tok_s"] > 0 and t["itl_ms"]["p50"] > 0, t
    assert all(e["model"] == UPSTREAM_MODEL for e in events if "model" in e)
    print("answers: chat and stream through the front equal the upstream's: %r; front TTFT %.1f ms, %.1f tok/s"
          % (want, t["ttft_ms"], t["decode_tok_s"]))
    return want


def check_concurrent(front, n_clients=4):
    """Clients at once, each with a local and an upstream request, streamed and whole: every
    answer complete and equal to the same request's answer alone (greedy; batch-invariant
    CPU engines on both sides)."""
    def ask(model, i, stream):
        body = chat_body(model, stream=stream, max_tokens=8)
        body["messages"][0]["content"] = "Name a colour, %d." % (i % 4)
        if not stream:
            status, r = front.post_json("/v1/chat/completions", body)
            assert status == 200 and r["choices"][0]["finish_reason"], (status, r)
            return r["choices"][0]["message"]["content"]
        events, done = stream_events(front, "/v1/chat/completions", body)
        assert done and any(e.get("choices") and e["choices"][0].get("finish_reason") for e in events), events
        return "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))

    jobs = [(m, i, i % 2 == 0) for i in range(n_clients) for m in (LOCAL_MODEL, UPSTREAM_MODEL)]
    alone = {(m, i % 4): ask(m, i, False) for m, i, _ in jobs if i < 4}
    results, errors = {}, []

    def client(job):
        try:
            results[job] = ask(*job)
        except Exception as e:  # pylint: disable=broad-except
            errors.append((job, e))

    threads = [threading.Thread(target=client, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD_S)
    assert not errors, errors
    for (m, i, stream), text in results.items():
        assert text == alone[(m, i % 4)], ((m, i, stream), text, alone[(m, i % 4)])
    assert len(results) == len(jobs)
    print("concurrent: %d requests at once, local and upstream, streamed and whole: each equal to its answer alone"
          % len(jobs))


def upstream_cached(front, prompt, salt=None):
    body = {"model": UPSTREAM_MODEL, "prompt": prompt, "max_tokens": 2, "temperature": 0}
    if salt is not None:
        body["cache_salt"] = salt
    status, r = front.post_json("/v1/completions", body)
    assert status == 200, r
    assert r["timings"]["cached_tokens"] == r["timings"]["upstream_timings"]["cached_tokens"], r["timings"]
    return r["timings"]["cached_tokens"]["memory"]


def check_scopes(front, prompt):
    """A scope that has sent nothing yet finds nothing; the bare scope (the caller's uid) may
    find the BOS token its own earlier chat requests left (1 token), never alice's prompt."""
    assert upstream_cached(front, prompt, "alice") == 0
    alice = upstream_cached(front, prompt, "alice")
    assert alice > 100, "the same scope found %d tokens of its own prompt upstream" % alice
    bob = upstream_cached(front, prompt, "bob")
    assert bob == 0, "a second scope hit %d tokens of the first one's cache upstream" % bob
    bare = upstream_cached(front, prompt)
    assert bare <= 1, "the caller's own scope hit %d tokens of a salted scope's cache upstream" % bare
    print("scopes: alice hit %d tokens of her own prompt; bob and the bare scope none of hers" % alice)


def upstream_cached_as(front, uid, prompt):
    """upstream_cached() for a request sent by the user uid through the kernel-checked socket."""
    body = {"model": UPSTREAM_MODEL, "prompt": prompt, "max_tokens": 2, "temperature": 0}
    status, data = post_as_user(uid, front.socket, "/v1/completions", body)
    assert status == 200, (uid, status, data)
    return json.loads(data)["timings"]["cached_tokens"]["memory"]


def check_users(front, prompt):
    """Real Unix users (as root): the scope is the caller's uid, from SO_PEERCRED, so each
    user's prompt lives under a salt of its own upstream. False when not root (not checked)."""
    if os.geteuid() != 0:
        print("not root: requests as other users are not checked")
        return False
    a, b = OTHER_UIDS
    assert upstream_cached_as(front, a, prompt) == 0
    mine = upstream_cached_as(front, a, prompt)
    assert mine > 100, "uid %d found %d tokens of its own prompt upstream" % (a, mine)
    other = upstream_cached_as(front, b, prompt)
    assert other <= 1, "uid %d hit %d tokens of uid %d's cache upstream" % (b, other, a)
    root = upstream_cached(front, prompt)
    assert root <= 1, "root hit %d tokens of uid %d's cache upstream" % (root, a)
    print("users: uid %d hit %d tokens of its own prompt; uid %d and root none of them" % (a, mine, b))
    return True


def check_kill_mid_stream(front, upstream):
    body = {"model": UPSTREAM_MODEL, "prompt": "Count: 1, 2, 3, 4, 5, 6,", "max_tokens": 400, "temperature": 0,
            "stream": True}
    c = front.connection()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    events, killed = [], False
    for e in sse_events(r):
        events.append(e)
        if not killed and e != "[DONE]" and e.get("choices") and e["choices"][0].get("text"):
            upstream.proc.send_signal(signal.SIGKILL)
            upstream.proc.wait()
            killed = True
    c.close()
    assert killed, events
    errors = [e for e in events if isinstance(e, dict) and "error" in e]
    assert len(errors) == 1 and "broke off" in errors[0]["error"]["message"], events[-3:]
    assert not any(isinstance(e, dict) and e.get("choices") and e["choices"][0].get("finish_reason")
                   for e in events), "a broken stream looked finished"
    print("killed mid-stream: %d events, then %r" % (len(events), errors[0]["error"]["message"]))


def check_stopped(front):
    status, r = front.post_json("/v1/chat/completions", chat_body(UPSTREAM_MODEL))
    assert status == 502 and "'up'" in r["error"]["message"], (status, r)
    c = front.connection()
    c.request("POST", "/v1/chat/completions", json.dumps(chat_body(UPSTREAM_MODEL, stream=True)),
              {"Content-Type": "application/json"})
    resp = c.getresponse()
    body = json.loads(resp.read())
    c.close()
    assert resp.status == 502 and "'up'" in body["error"]["message"], (resp.status, body)
    status, r = front.post_json("/v1/chat/completions", chat_body(UPSTREAM_MODEL))
    assert status == 502, (status, r)
    status, r = front.post_json("/v1/chat/completions", chat_body(UPSTREAM_MODEL))
    assert status == 503 and "not answering" in r["error"]["message"], (status, r)
    status, health = front.request("GET", "/health")
    assert status == 200 and json.loads(health)["upstreams"][0]["state"] in ("open", "half_open"), health
    m = front.metrics()
    assert m['hearth_upstream_up{upstream="up"}'] == 0 and m['hearth_upstream_failures_total{upstream="up"}'] == 3, m
    print("stopped upstream: 502 naming it (whole and streamed), then the circuit opened: %s" % r["error"]["message"])


def check_recovers(front, hearthd, model, port):
    """The upstream back on its port: the background probe closes the circuit, and requests
    are forwarded again. Returns the new upstream."""
    upstream = Hearthd(hearthd, model, "--listen-tcp", "127.0.0.1:%d" % port, threads=1)
    deadline = time.monotonic() + HANG_GUARD_S
    while json.loads(front.request("GET", "/health")[1])["upstreams"][0]["state"] != "closed":
        assert time.monotonic() < deadline, "hang guard: the circuit did not close"
        time.sleep(0.1)
    status, r = front.post_json("/v1/chat/completions", chat_body(UPSTREAM_MODEL, max_tokens=4))
    assert status == 200 and r["timings"]["upstream"] == "up", (status, r)
    print("recovered: the probe closed the circuit once the upstream answered again")
    return upstream


def check_local(front):
    status, r = front.post_json("/v1/chat/completions", chat_body(LOCAL_MODEL, max_tokens=4))
    assert status == 200 and r["model"] == LOCAL_MODEL, (status, r)


def upstream_tables(port, ca, other_ca, tls_port, stall_port, err_port):
    """The front's [[upstream]]s: the upstream hearthd itself, and the proxies before it."""
    common = 'models = ["%s"]\nconnect_timeout = 5\n' % LOCAL_MODEL
    return "".join([
        '[[upstream]]\nname = "up"\nurl = "http://127.0.0.1:%d"\nmodel_prefix = "up/"\n'
        "connect_timeout = 5\nfirst_byte_timeout = 120\nidle_timeout = 60\n" % port,
        '[[upstream]]\nname = "tls"\nurl = "https://localhost:%d"\nmodel_prefix = "tls/"\nca_file = "%s"\n%s'
        % (tls_port, ca, common),
        '[[upstream]]\nname = "badca"\nurl = "https://localhost:%d"\nmodel_prefix = "badca/"\nca_file = "%s"\n%s'
        % (tls_port, other_ca, common),
        '[[upstream]]\nname = "stall"\nurl = "http://127.0.0.1:%d"\nmodel_prefix = "stall/"\n'
        "first_byte_timeout = 1\n%s" % (stall_port, common),
        '[[upstream]]\nname = "err"\nurl = "http://127.0.0.1:%d"\nmodel_prefix = "err/"\n%s' % (err_port, common),
        '[[upstream]]\nname = "errfb"\nurl = "http://127.0.0.1:%d"\nmodel_prefix = "errfb/"\nfallback = "%s"\n%s'
        % (err_port, LOCAL_MODEL, common),
    ])


def check_fallback(front, want):
    """An upstream with a local fallback model: the same greedy answer from the local copy of
    the model, said in timings, whole and streamed."""
    status, r = front.post_json("/v1/chat/completions", chat_body("errfb/" + LOCAL_MODEL))
    assert status == 200 and r["choices"][0]["message"]["content"] == want, (status, r)
    assert r["model"] == LOCAL_MODEL and r["timings"]["fallback_from"] == "errfb", r
    assert "HTTP 500" in r["timings"]["fallback_reason"], r["timings"]
    events, done = stream_events(front, "/v1/chat/completions", chat_body("errfb/" + LOCAL_MODEL, stream=True))
    assert done
    final = [e for e in events if e.get("choices") and e["choices"][0].get("finish_reason")]
    assert final and final[0]["timings"]["fallback_from"] == "errfb", events
    assert "fallback model gemma3:270m" in front.log_text()
    print("fallback: the local model answered for 'errfb' (whole and streamed), said in timings and the log")


def check_faults(front, want, err_proxy, stall_proxy):
    status, r = front.post_json("/v1/chat/completions", chat_body("tls/" + LOCAL_MODEL))
    assert status == 200 and r["choices"][0]["message"]["content"] == want, (status, r)
    print("TLS: the same answer through https with the test's own CA")
    status, r = front.post_json("/v1/chat/completions", chat_body("badca/" + LOCAL_MODEL))
    assert status == 502 and "'badca'" in r["error"]["message"], (status, r)
    assert "certificate" in r["error"]["message"], r
    print("another CA: %d %s" % (status, r["error"]["message"]))
    status, r = front.post_json("/v1/chat/completions", chat_body("err/" + LOCAL_MODEL))
    assert status == 502 and "'err'" in r["error"]["message"] and "HTTP 500" in r["error"]["message"], (status, r)
    assert err_proxy.connections == 2, "a 500 was not retried once on a new connection"
    print("HTTP 500: retried once, then %d %s" % (status, r["error"]["message"]))
    status, r = front.post_json("/v1/chat/completions", chat_body("stall/" + LOCAL_MODEL))
    assert status == 504 and "'stall'" in r["error"]["message"], (status, r)
    assert stall_proxy.connections == 2, "a stall was not retried once on a new connection"
    print("stalled before the first byte: retried once, then %d %s" % (status, r["error"]["message"]))
    check_fallback(front, want)
    status, health = front.request("GET", "/health")
    by_name = {u["name"]: u for u in json.loads(health)["upstreams"]}
    assert by_name["badca"]["retries"] == 1 and by_name["badca"]["failures"] == 1, by_name["badca"]
    assert by_name["tls"]["failures"] == 0 and by_name["up"]["state"] == "closed", by_name


def sdk_clients(front):
    """The official ollama and anthropic clients on the front's Unix socket (an httpx
    transport each), or None when the interpreter has not got them."""
    try:
        import anthropic  # pylint: disable=import-outside-toplevel
        import httpx  # pylint: disable=import-outside-toplevel
        import httpx2  # pylint: disable=import-outside-toplevel
        import ollama  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    o = ollama.Client(host="http://localhost", timeout=HANG_GUARD_S, transport=httpx.HTTPTransport(uds=front.socket))
    a = anthropic.Anthropic(base_url="http://localhost", api_key="unused", timeout=HANG_GUARD_S, max_retries=0,
                            http_client=httpx2.Client(transport=httpx2.HTTPTransport(uds=front.socket)))
    return o, a, ollama.ResponseError, anthropic.APIStatusError


def check_other_surfaces(front, want, clients):
    """Ollama's /api/chat and /api/generate and Anthropic's /v1/messages for the upstream
    model, through the official clients: whole and streamed, the same greedy answer as the
    OpenAI route's; then a 500 upstream (retried) and a stall in each one's error shape, and
    the local fallback through Ollama's route."""
    o, a, ollama_error, anthropic_error = clients
    question = chat_body(UPSTREAM_MODEL)["messages"]
    opts = {"temperature": 0, "num_predict": 12}
    r = o.chat(model=UPSTREAM_MODEL, messages=question, options=opts)
    assert r.message.content == want and r.done and r.eval_count > 0, r
    text = "".join(p.message.content for p in o.chat(model=UPSTREAM_MODEL, messages=question, options=opts,
                                                      stream=True))
    assert text == want, (text, want)
    g = o.generate(model=UPSTREAM_MODEL, prompt=question[0]["content"], options=opts)
    assert g.response == want and g.done_reason == "length", g
    m = a.messages.create(model=UPSTREAM_MODEL, max_tokens=12, messages=question, extra_body={"temperature": 0})
    assert m.content[0].text == want and m.stop_reason == "max_tokens" and m.usage.output_tokens == 12, m
    with a.messages.stream(model=UPSTREAM_MODEL, max_tokens=12, messages=question,
                           extra_body={"temperature": 0}) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    assert streamed == want and final.stop_reason == "max_tokens", (streamed, final)
    print("ollama and anthropic clients: chat, stream, generate and messages equal the OpenAI route's answer")
    try:
        o.chat(model="err/" + LOCAL_MODEL, messages=question, options=opts)
        raise AssertionError("an upstream answering 500 gave an Ollama answer")
    except ollama_error as e:
        assert e.status_code == 502 and "'err'" in e.error and "HTTP 500" in e.error, e
    try:
        a.messages.create(model="stall/" + LOCAL_MODEL, max_tokens=12, messages=question)
        raise AssertionError("a stalled upstream gave an Anthropic answer")
    except anthropic_error as e:
        assert e.status_code == 504 and "'stall'" in e.message, e
    r = o.chat(model="errfb/" + LOCAL_MODEL, messages=question, options=opts)
    assert r.message.content == want, r
    print("faults: 502 in Ollama's shape, 504 in Anthropic's, the fallback answering Ollama's chat")


def logprob_rows(logprobs):
    return [(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs or []]) for t in logprobs or []]


def check_same_as_upstream(port, clients):
    """What a local model says besides its text, the upstream model says through the front
    too, compared with the same request to the upstream's own local model on the upstream's
    own routes: Anthropic's prompt count (message_start's input_tokens, message_delta's and
    a whole message's input and cache-read tokens) and Ollama's logprobs, whole and streamed."""
    import anthropic  # pylint: disable=import-outside-toplevel
    import ollama  # pylint: disable=import-outside-toplevel
    o, a, _, _ = clients
    direct = "http://127.0.0.1:%d" % port
    od = ollama.Client(host=direct, timeout=HANG_GUARD_S)
    ad = anthropic.Anthropic(base_url=direct, api_key="unused", timeout=HANG_GUARD_S, max_retries=0)
    question = chat_body(UPSTREAM_MODEL)["messages"]

    def prompt_counts(client, model):
        events = list(client.messages.create(model=model, max_tokens=6, messages=question, stream=True,
                                             extra_body={"temperature": 0}))
        assert events[0].type == "message_start", events[0]
        end = [e for e in events if e.type == "message_delta"][-1].usage
        m = client.messages.create(model=model, max_tokens=6, messages=question, extra_body={"temperature": 0})
        return (events[0].message.usage.input_tokens, end.input_tokens + end.cache_read_input_tokens,
                m.usage.input_tokens + m.usage.cache_read_input_tokens)
    want, got = prompt_counts(ad, LOCAL_MODEL), prompt_counts(a, UPSTREAM_MODEL)
    assert want[0] > 0 and want == (want[0],) * 3 and got == want, (got, want)

    opts = {"temperature": 0, "num_predict": 8}

    def with_logprobs(client, model, stream):
        r = client.chat(model=model, messages=question, options=opts, logprobs=True, top_logprobs=3, stream=stream)
        parts = list(r) if stream else [r]
        return "".join(p.message.content for p in parts), sum((logprob_rows(p.logprobs) for p in parts), [])
    for stream in (False, True):
        want_lp, got_lp = with_logprobs(od, LOCAL_MODEL, stream), with_logprobs(o, UPSTREAM_MODEL, stream)
        assert len(want_lp[1]) == 8 and all(len(top) == 3 for _, _, top in want_lp[1]), want_lp
        assert got_lp == want_lp, (stream, got_lp, want_lp)
    g = o.generate(model=UPSTREAM_MODEL, prompt=question[0]["content"], options=opts, logprobs=True, top_logprobs=2)
    gd = od.generate(model=LOCAL_MODEL, prompt=question[0]["content"], options=opts, logprobs=True, top_logprobs=2)
    assert g.response == gd.response and logprob_rows(g.logprobs) == logprob_rows(gd.logprobs), (g, gd)
    print("as the upstream's own model: message_start's input_tokens %d; Ollama's logprobs of %d tokens, "
          "whole and streamed" % (want[0], len(want_lp[1])))


def front_daemon(hearthd, model, cache_dir, config):
    front = CacheDaemon(hearthd, model, cache_dir, "--config", config, *other_users_args())
    open_to_other_users(front)
    return front


def front_by_flags(hearthd, model, cache_dir, port):
    """The front again, its upstream given by --upstream-* flags and HEARTH_UPSTREAM_*
    variables only (no config file); the prefix's variable is overridden by its flag."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEARTH_UPSTREAM_") and k != "HEARTH_CONFIG"}
    env.update({"HEARTH_UPSTREAM_NAME": "up", "HEARTH_UPSTREAM_FIRST_BYTE_TIMEOUT": "120",
                "HEARTH_UPSTREAM_IDLE_TIMEOUT": "60", "HEARTH_UPSTREAM_MODEL_PREFIX": "lost/"})
    front = CacheDaemon(hearthd, model, cache_dir, "--upstream-url", "http://127.0.0.1:%d" % port,
                        "--upstream-model-prefix", "up/", "--upstream-connect-timeout", "5", *other_users_args(),
                        env=env)
    open_to_other_users(front)
    return front


def check_flags_front(front, want):
    """The front configured by flags and variables lists the upstream's model and answers it."""
    check_listings(front)
    status, r = front.post_json("/v1/chat/completions", chat_body(UPSTREAM_MODEL))
    assert status == 200 and r["choices"][0]["message"]["content"] == want, (status, r)
    assert r["timings"]["upstream"] == "up", r["timings"]
    print("flags and environment only: the upstream 'up' listed and answering %r" % want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--clients", action="store_true",
                    help="the ollama and anthropic clients must be there (the test venv): check those surfaces")
    args = ap.parse_args()
    model = gemma_model_or_skip()
    work = tempfile.mkdtemp(prefix="hearth-upstream-e2e-")
    port = free_port()
    ca, other_ca, cert, key = make_certs(work)
    proxies = [FaultProxy(port, "pass", cert, key), FaultProxy(port, "stall"), FaultProxy(port, "500")]
    config = os.path.join(work, "front.toml")
    with open(config, "w") as f:
        f.write(upstream_tables(port, ca, other_ca, *(p.port for p in proxies)))
    cache_dir = os.path.join(work, "front-cache")
    upstream = Hearthd(args.hearthd, model, "--listen-tcp", "127.0.0.1:%d" % port, threads=1)
    front = front_daemon(args.hearthd, model, cache_dir, config)
    try:
        check_listings(front)
        want = check_answers_equal(front, port)
        check_concurrent(front)
        check_faults(front, want, proxies[2], proxies[1])
        clients = sdk_clients(front)
        assert clients or not args.clients, "--clients: the ollama and anthropic clients cannot be imported"
        if clients:
            check_other_surfaces(front, want, clients)
            check_same_as_upstream(port, clients)
        else:
            print("no ollama and anthropic clients here: their surfaces are not checked")
        check_local(front)
        prompt = long_prompt(45, 6)
        check_scopes(front, prompt)
        users_prompt = "Whose notes are these? " + long_prompt(46, 6)  # no head shared with the above
        users = check_users(front, users_prompt)
        front.stop()
        front = front_by_flags(args.hearthd, model, cache_dir, port)
        check_flags_front(front, want)
        assert upstream_cached(front, prompt, "alice") > 0, "alice's salt changed when the front restarted"
        if users:
            assert upstream_cached_as(front, OTHER_UIDS[0], users_prompt) > 0, "a user's salt changed at the restart"
        print("restart (now by flags): alice's scope (and a user's) still hits her prompt upstream")
        check_kill_mid_stream(front, upstream)
        check_local(front)
        check_stopped(front)
        check_local(front)
        upstream.close()
        upstream = check_recovers(front, args.hearthd, model, port)
        check_local(front)
        print("the front served its local model throughout")
        front.stop()  # exit code 0: no sanitizer report, no leak (the ASan build too)
        assert upstream.close() == 0
    finally:
        front.close()
        upstream.close()
        for p in proxies:
            p.close()
        shutil.rmtree(work, ignore_errors=True)
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
