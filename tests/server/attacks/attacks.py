#!/usr/bin/env python3
"""Attacks on `dsv4 serve` over loopback (issue 27 item 7), Python 3 standard library only.

Usage: attacks.py DSV4_BINARY WORKDIR [CASE ...]   (CASE: 1..10; default all)

Makes tiny models in WORKDIR, starts `dsv4 serve --port 0` per group of cases, runs the cases,
prints one row per check (expected status, got, server RSS growth, /health latency) and exits 1
if any check fails. Attacking sockets bind 127.0.0.2 and up (at most 50 connections per
address: the server limits connections per client address); probes (/health, /metrics, the
normal streams) come from 127.0.0.1. Every request carries `Host: 127.0.0.1:PORT` and POSTs
carry `Content-Type: application/json` unless the case is about them. Every socket operation
has a deadline, so a server that never answers fails a case instead of hanging the test.

RSS: VmRSS of the server (/proc/PID/status) before and after the case, and its peak sampled
every 20 ms during the case; an RSS bound applies to the larger growth (peak - before).
/health: probed from 127.0.0.1 every 0.2 s during every case; its worst latency is reported,
and bounded (< 1 s, every probe 200) where the case says so.

Cases
  1  A 1 GB chunked body to POST /v1/chat/completions, sent in 1 MiB chunks until the server
     answers or closes: 413 request_too_large, RSS growth < 64 MiB. (default --max-body-bytes)
  2  A POST with neither Content-Length nor Transfer-Encoding followed by endless bytes (at
     most 1 GB): 413 request_too_large, RSS growth < 64 MiB.
  3  2,000 headers: 431.
  4  Server --max-connections 4096 --read-timeout 10 --idle-timeout 60. Eight streamed chats
     (temperature 0, seed 7, max_tokens 16, ignore_eos) give the offline text; then 1,000 idle connections
     (nothing sent) and 500 slowloris clients (request line, then one header byte every 2 s)
     are opened, and the same eight streams run again during the attack: each text equals the
     offline text, every slowloris socket is closed by the server within read-timeout + 4 s of
     its first byte, and /health answers 200 in < 1 s every time.
  5  Server --max-queue 4 --batch-size 2 (each request >= 3.2 s: --test-min-step-seconds
     0.05): 256 concurrent non-streamed completions (max_tokens 64, ignore_eos): none hangs
     (the case is bounded at 60 s), at least half get 429 with Retry-After within 3 s, the
     rest 200.
  6  Server on a 4k-context tiny model (each request >= 40 s: --test-min-step-seconds 0.01):
     64 non-streamed completions (max_tokens 4000, ignore_eos) whose clients close after
     100 ms; within 10 s /metrics shows no running or queued request, the free cache pages
     equal the idle count read before the case, and some requests were cancelled.
  7  a: a cross-origin text/plain POST (Origin: http://evil.example): 415 or 403.
     b: Host: evil.example: 421.
  8  Server --max-body-bytes 16777216. a: an 8 MiB `messages` of `[{},{},...]`: 400.
     b: a prompt of 4 M token ids to /v1/completions: 400. RSS growth < 64 MiB each.
  9  Chunked framing the body limit does not count: a: a chunk-size line whose extension never
     ends (`1;aaaa...`, up to 1 GB); b: a last chunk followed by endless trailer fields. 413
     (431 for b is fine too), RSS growth < 64 MiB each.
 10  Ambiguous framing (RFC 9112), each on one connection that must get exactly one response,
     400, and then the close: a: `GET /health` with `Transfer-Encoding: gzip` and a body
     holding `GET /metrics ...` (smuggled: never answered); b: `Transfer-Encoding: chunked,
     identity`; c: two `Transfer-Encoding: chunked` lines; d: two `Host` fields; e: a chunk
     size that is not hex (`zz`).
 11  Work a body can make (issue 40), server --max-body-bytes 16777216: a: a chat whose assistant
     tool call's `arguments` hold 60,000 keys (0.96 MB), twice, to /v1/chat/completions and to
     /tokenize: 400 (the prompt exceeds the context) within 10 s, /health < 1 s; b: a body of
     50,000 keys (0.8 MB): 400 within 5 s, /health < 1 s; c: 8 concurrent completions with
     n 8 and four 2 MB stop strings: 400 field_too_large each, RSS growth < 160 MiB (two bytes
     per body byte in flight; 1.5 GB before); d: server --max-pending-bytes 262144 (four
     requests' smallest charge), 8 concurrent completions that run >= 3.2 s: at least 4 get 503
     server_overloaded with Retry-After, the rest 200.
"""
import errno
import json
import os
import re
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time

MiB = 1 << 20
ABORT_RSS_KIB = 256 * 1024  # a body attack stops sending once the server grew this much (it failed)
PROBE = "127.0.0.1"
PER_ADDRESS = 50  # attacking connections per source address


def attack_source(i):
    """Source address of the i-th attacking connection: 127.0.0.2 and up, 50 per address."""
    n = 2 + i // PER_ADDRESS
    return "127.0.%d.%d" % (n // 254, 1 + n % 254) if n >= 255 else "127.0.0.%d" % n


# ---------------------------------------------------------------------------------------------
# Raw-socket HTTP/1.1 client.

class HttpFailure(Exception):
    """No HTTP response: "timeout", "reset", "closed", "connect: ...", ..."""


class Response:
    def __init__(self, status, reason, headers, body):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body
        self.elapsed = 0.0

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def error_code(self):
        j = self.json()
        return j.get("error", {}).get("code") if isinstance(j, dict) and isinstance(j.get("error"), dict) else None


def left(deadline):
    t = deadline - time.monotonic()
    if t <= 0:
        raise HttpFailure("timeout")
    return t


def connect(port, src, deadline):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((src, 0))
        s.settimeout(left(deadline))
        s.connect(("127.0.0.1", port))
    except socket.timeout:
        s.close()
        raise HttpFailure("connect timeout")
    except OSError as e:
        s.close()
        raise HttpFailure("connect: %s" % (e.strerror or e))
    return s


def build_request(port, method, path, body=None, headers=(), content_type="application/json", host=None,
                  length=True):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % (host or "127.0.0.1:%d" % port)]
    if method == "POST" and content_type:
        lines.append("Content-Type: " + content_type)
    if body is not None and length:
        lines.append("Content-Length: %d" % len(body))
    lines += ["%s: %s" % kv for kv in headers]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


class Reader:
    """Buffered reads from a socket, each bounded by one deadline."""

    def __init__(self, sock, deadline):
        self.sock, self.deadline, self.buf, self.eof = sock, deadline, bytearray(), False

    def fill(self):
        self.sock.settimeout(left(self.deadline))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise HttpFailure("timeout")
        except ConnectionResetError:
            raise HttpFailure("reset")
        except OSError as e:
            raise HttpFailure("recv: %s" % (e.strerror or e))
        if not data:
            self.eof = True
        self.buf += data
        return bool(data)

    def until(self, mark):
        while mark not in self.buf:
            if not self.fill():
                raise HttpFailure("closed" if not self.buf else "closed mid-response")
        i = self.buf.index(mark) + len(mark)
        out = bytes(self.buf[:i])
        del self.buf[:i]
        return out

    def exact(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise HttpFailure("closed mid-body")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def rest(self):
        try:
            while self.fill():
                pass
        except HttpFailure as e:
            if str(e) != "reset":
                raise
        out = bytes(self.buf)
        self.buf.clear()
        return out


def read_response(sock, deadline):
    r = Reader(sock, deadline)
    head = r.until(b"\r\n\r\n").decode("latin-1").split("\r\n")
    parts = head[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise HttpFailure("bad status line %r" % head[0][:60])
    headers = {}
    for line in head[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    status = int(parts[1])
    if status in (204, 304) or 100 <= status < 200:
        body = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size = int(r.until(b"\r\n").split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while r.until(b"\r\n") != b"\r\n":
                    pass
                break
            chunks.append(r.exact(size))
            r.exact(2)
        body = b"".join(chunks)
    elif "content-length" in headers:
        body = r.exact(int(headers["content-length"]))
    else:
        body = r.rest()
    return Response(status, parts[2] if len(parts) > 2 else "", headers, body)


def send_watching(sock, blocks, deadline, keep_going=None):
    """Sends the blocks in order until one fails, the server has something to say (a response or
    a close) or keep_going() turns false. Returns (bytes sent, why sending stopped early or None)."""
    sent = 0
    for block in blocks:
        if keep_going and not keep_going():
            return sent, "stopped: server RSS grew past %d MiB" % (ABORT_RSS_KIB // 1024)
        try:
            readable = selectors.DefaultSelector()
            readable.register(sock, selectors.EVENT_READ)
            ready = readable.select(0)
            readable.close()
            if ready:
                return sent, None
            sock.settimeout(min(5.0, left(deadline)))
            sock.sendall(block)
        except HttpFailure:
            return sent, "timeout"
        except socket.timeout:
            return sent, "send stalled"
        except OSError as e:
            return sent, e.strerror or str(e)
        sent += len(block)
    return sent, None


def split_blocks(data, size=MiB):
    return (data[i:i + size] for i in range(0, len(data), size))


def request(port, method, path, body=None, src=PROBE, timeout=10.0, **build):
    """One request on a fresh connection; raises HttpFailure when no response arrives."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    sock = connect(port, src, deadline)
    try:
        _, send_error = send_watching(sock, split_blocks(build_request(port, method, path, body, **build)), deadline)
        try:
            resp = read_response(sock, deadline)
        except HttpFailure as e:
            raise HttpFailure("%s (send: %s)" % (e, send_error) if send_error else str(e))
    finally:
        sock.close()
    resp.elapsed = time.monotonic() - t0
    return resp


def post_json(port, path, obj, **kw):
    return request(port, "POST", path, json.dumps(obj).encode(), **kw)


def outcome(fn):
    """A response, or the HttpFailure's text."""
    try:
        return fn()
    except HttpFailure as e:
        return str(e)


def status_text(r):
    if isinstance(r, str):
        return r
    code = r.error_code()
    return "%d %s" % (r.status, code) if code else str(r.status)


def connect_many(port, n, first_index, deadline):
    """n non-blocking connects from attack_source(first_index..); returns (connected, failed)."""
    sel = selectors.DefaultSelector()
    socks, failed = [], 0
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((attack_source(first_index + i), 0))
            err = s.connect_ex(("127.0.0.1", port))
        except OSError:
            err = -1
        if err == 0:
            socks.append(s)
        elif err == errno.EINPROGRESS:
            sel.register(s, selectors.EVENT_WRITE)
        else:
            failed += 1
            s.close()
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
            s = key.fileobj
            sel.unregister(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                socks.append(s)
            else:
                failed += 1
                s.close()
    for key in list(sel.get_map().values()):
        sel.unregister(key.fileobj)
        key.fileobj.close()
        failed += 1
    sel.close()
    return socks, failed


def closed_by_peer(sock):
    """True when the peer has closed (or reset) a connection that has sent nothing since."""
    try:
        sock.setblocking(False)
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def metrics(port):
    """/metrics as {name-with-labels: value}; {} when it cannot be read."""
    r = outcome(lambda: request(port, "GET", "/metrics", timeout=3.0))
    out = {}
    if isinstance(r, str) or r.status != 200:
        return out
    for line in r.body.decode("utf-8", "replace").splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def chat_stream(port, prompt, timeout):
    """A streamed chat at temperature 0; returns (text, None) or (None, what went wrong)."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 16, "ignore_eos": True,
            "temperature": 0, "seed": 7, "stream": True}
    r = outcome(lambda: post_json(port, "/v1/chat/completions", body, timeout=timeout))
    if isinstance(r, str):
        return None, r
    if r.status != 200:
        return None, "status %d" % r.status
    text, done = [], False
    for line in r.body.decode("utf-8", "replace").splitlines():
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            continue
        try:
            chunk = json.loads(line[6:])
        except ValueError:
            return None, "bad chunk %r" % line[:80]
        for choice in chunk.get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
    return ("".join(text), None) if done else (None, "no [DONE]")


def run_concurrently(fns, timeout):
    """Runs each fn on its own thread; returns their results (None: still running at timeout)."""
    results = [None] * len(fns)

    def run(i):
        results[i] = fns[i]()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return results


# ---------------------------------------------------------------------------------------------
# The server under test, its RSS and its /health latency.

def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class RssSampler:
    """Peak VmRSS of a process, sampled every 20 ms on a thread."""

    def __init__(self, pid):
        self.pid, self.peak, self.stopped = pid, rss_kib(pid) or 0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopped.wait(0.02):
            kib = rss_kib(self.pid)
            if kib:
                self.peak = max(self.peak, kib)

    def stop(self):
        self.stopped.set()
        self.thread.join(1.0)
        return self.peak


class HealthProber:
    """GET /health from 127.0.0.1 every 0.2 s; a failed probe (no 200 within 3 s) counts as inf."""

    def __init__(self, port):
        self.port, self.latencies, self.stopped = port, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            t0 = time.monotonic()
            r = outcome(lambda: request(self.port, "GET", "/health", timeout=3.0))
            ok = not isinstance(r, str) and r.status == 200
            self.latencies.append(time.monotonic() - t0 if ok else float("inf"))
            if self.stopped.wait(max(0.0, 0.2 - (time.monotonic() - t0))):
                return

    def stop(self):
        self.stopped.set()
        self.thread.join(4.0)
        return self.latencies


class Server:
    def __init__(self, dsv4, work, name, args):
        self.dsv4, self.work, self.name, self.args = dsv4, work, name, args
        self.proc, self.port, self.error = None, None, None

    def start(self):
        out = os.path.join(self.work, self.name + ".out")
        err = os.path.join(self.work, self.name + ".err")
        with open(out, "wb") as o, open(err, "wb") as e:
            self.proc = subprocess.Popen([self.dsv4, "serve", "--port", "0"] + self.args, stdout=o, stderr=e,
                                         stdin=subprocess.DEVNULL)
        prefix = "dsv4 serve: listening on http://"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(out, errors="replace") as f:
                for line in f:
                    if line.startswith(prefix):
                        self.port = int(line[len(prefix):].strip().rsplit(":", 1)[1].rstrip("/"))
                        return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        with open(err, errors="replace") as f:
            tail = f.read().strip().splitlines()[-3:]
        self.error = "server %s did not start (exit %s): %s" % (self.name, self.proc.poll(), " / ".join(tail))
        self.stop()
        return False

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


# ---------------------------------------------------------------------------------------------
# The cases. Each returns a list of (check, expected, got, ok, note).

def one(check, expected, got, ok, note=""):
    return [(check, expected, got, ok, note)]


def rss_below_abort(server):
    """keep_going for send_watching: false once the server's RSS grew ABORT_RSS_KIB past now."""
    base = rss_kib(server.pid) or 0
    return lambda: (rss_kib(server.pid) or 0) - base < ABORT_RSS_KIB


def expect_413(r):
    return not isinstance(r, str) and r.status == 413 and r.error_code() == "request_too_large"


def body_attack(server, blocks, deadline):
    """Sends the blocks from an attacking address until the server answers, closes or grows past
    ABORT_RSS_KIB; returns (the response or a failure text, a note of what was sent)."""
    note = [""]

    def attack():
        sock = connect(server.port, attack_source(0), deadline)
        try:
            sent, err = send_watching(sock, blocks, deadline, rss_below_abort(server))
            note[0] = "sent %d MiB%s" % (sent // MiB, "; " + err if err else "")
            return read_response(sock, min(deadline, time.monotonic() + (2.0 if err else 10.0)))
        finally:
            sock.close()

    r = outcome(attack)
    return r, note[0]


def case_chunked_gigabyte(server):
    deadline = time.monotonic() + 60
    head = build_request(server.port, "POST", "/v1/chat/completions", headers=[("Transfer-Encoding", "chunked")])
    prefix = b'{"messages": [{"role": "user", "content": "'
    chunk = b"%x\r\n" % MiB + b"a" * MiB + b"\r\n"

    def blocks():
        yield head + b"%x\r\n" % len(prefix) + prefix + b"\r\n"
        for _ in range(1024):
            yield chunk
        yield b'3\r\n"}]\r\n0\r\n\r\n'

    r, note = body_attack(server, blocks(), deadline)
    return one("1 GB chunked body", "413", status_text(r), expect_413(r), note)


def case_endless_body(server):
    deadline = time.monotonic() + 60
    head = build_request(server.port, "POST", "/v1/chat/completions", body=b"", length=False)
    block = b"a" * MiB

    r, note = body_attack(server, [head + b'{"prompt": "'] + [block] * 1024, deadline)
    return one("POST, no length, endless", "413", status_text(r), expect_413(r), note)


def endless_chunk_framing(server, first, block, check):
    deadline = time.monotonic() + 60
    head = build_request(server.port, "POST", "/v1/chat/completions", headers=[("Transfer-Encoding", "chunked")])

    r, note = body_attack(server, [head + first] + [block] * 1024, deadline)
    ok = not isinstance(r, str) and r.status in (413, 431)
    return one(check, "413|431", status_text(r), ok, note)


def case_chunk_extension(server):
    return endless_chunk_framing(server, b"1;ext=", b"a" * MiB, "endless chunk extension")


def case_endless_trailer(server):
    line = b"X-T: v\r\n"
    return endless_chunk_framing(server, b"2\r\n{}\r\n0\r\n", line * (MiB // len(line)), "endless trailer")


def case_many_headers(server):
    headers = [("X-Attack-%d" % i, "v") for i in range(2000)]
    r = outcome(lambda: request(server.port, "GET", "/v1/models", headers=headers, src=attack_source(0)))
    return one("2,000 headers", "431", status_text(r), not isinstance(r, str) and r.status == 431)


STREAM_PROMPTS = ["Tell me story number %d." % i for i in range(8)]


SLOW_READ_TIMEOUT = 10  # --read-timeout of the case-4 server


def case_slowloris(server, read_timeout=SLOW_READ_TIMEOUT, n_idle=1000, n_slow=500):
    rows = []
    offline = run_concurrently([lambda p=p: chat_stream(server.port, p, 30.0) for p in STREAM_PROMPTS], 35.0)
    bad = [r[1] or "empty text" if r else "hung" for r in offline if not r or not r[0]]
    if bad:
        return one("offline streams", "8 x 200", "failed: %s" % bad[0], False, "%d of 8 failed" % len(bad))

    idle, idle_failed = connect_many(server.port, n_idle, 0, time.monotonic() + 10)
    slow, slow_failed = connect_many(server.port, n_slow, n_idle, time.monotonic() + 10)
    line = b"POST /v1/chat/completions HTTP/1.1\r\n"
    first_byte, closed_at, answered = {}, {}, {}
    for s in slow:
        try:
            s.send(line)
            first_byte[s] = time.monotonic()
        except OSError:
            closed_at[s] = first_byte[s] = time.monotonic()
    attack_start = time.monotonic()

    streams = [None] * len(STREAM_PROMPTS)

    def run_streams():
        streams[:] = run_concurrently([lambda p=p: chat_stream(server.port, p, 20.0) for p in STREAM_PROMPTS], 25.0)

    stream_thread = threading.Thread(target=run_streams, daemon=True)
    stream_thread.start()

    # Dribble one header byte every 2 s to every open slowloris socket; note when the server closes.
    sel = selectors.DefaultSelector()
    for s in slow:
        if s not in closed_at:
            sel.register(s, selectors.EVENT_READ)
    header = b"X-Slowloris: " + b"a" * 1000
    next_byte, k = attack_start + 2.0, 0
    give_up = attack_start + read_timeout + 4.0
    while sel.get_map() and time.monotonic() < give_up:
        for key, _ in sel.select(max(0.0, min(next_byte, give_up) - time.monotonic())):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if data:
                answered.setdefault(s, data[:12].decode("latin-1"))
            else:
                closed_at[s] = time.monotonic()
                sel.unregister(s)
        if time.monotonic() >= next_byte:
            for key in list(sel.get_map().values()):
                try:
                    key.fileobj.send(header[k:k + 1])
                except OSError:
                    pass
            next_byte += 2.0
            k += 1
    sel.close()
    stream_thread.join(max(0.0, attack_start + 25.0 - time.monotonic()))
    idle_closed = sum(1 for s in idle if closed_by_peer(s))
    for s in idle + slow:
        s.close()

    got = "%d idle + %d slow connected" % (len(idle), len(slow))
    notes = ["%d idle closed by the server (--idle-timeout 60)" % idle_closed] if idle_closed else []
    if idle_failed or slow_failed:
        notes.append("%d + %d failed to connect" % (idle_failed, slow_failed))
    rows += one("1,000 idle + 500 slow connect", "1500 connected", got, idle_failed == 0 and slow_failed == 0,
                "; ".join(notes))
    times = [closed_at[s] - first_byte[s] for s in slow if s in closed_at]
    n_408 = sum(1 for v in answered.values() if " 408" in v)
    bound = read_timeout + 4.0
    rows += one("slowloris closed by server", "all <= %.0fs" % bound,
                "%d/%d closed, max %s" % (len(times), len(slow), "%.1fs" % max(times) if times else "-"),
                len(slow) == n_slow and len(times) == len(slow) and max(times) <= bound,
                "%d answered 408" % n_408)
    same = sum(1 for r, o in zip(streams, offline) if r and r[0] is not None and r[0] == o[0])
    errors = [r[1] if r else "hung" for r in streams if not r or r[0] is None]
    rows += one("8 streams under attack", "8/8 offline text", "%d/8 same" % same, same == len(STREAM_PROMPTS),
                "first error: %s" % errors[0] if errors else "")
    return rows


def case_queue_flood(server, n=256):
    body = json.dumps({"prompt": "Once", "max_tokens": 64, "ignore_eos": True}).encode()

    def client(i):
        return outcome(lambda: request(server.port, "POST", "/v1/completions", body, src=attack_source(i),
                                       timeout=55.0))

    t0 = time.monotonic()
    results = run_concurrently([lambda i=i: client(i) for i in range(n)], 60.0)
    took = time.monotonic() - t0
    n429 = [r for r in results if r is not None and not isinstance(r, str) and r.status == 429]
    n200 = [r for r in results if r is not None and not isinstance(r, str) and r.status == 200]
    other = [status_text(r) if r is not None else "hung" for r in results if r not in n429 and r not in n200]
    no_retry = sum(1 for r in n429 if "retry-after" not in r.headers)
    slowest = max((r.elapsed for r in n429), default=0.0)
    ok = not other and len(n429) >= n // 2 and no_retry == 0 and slowest < 3.0
    note = "case %.1fs; 429 slowest %.2fs; 200 slowest %.1fs" % (took, slowest, max((r.elapsed for r in n200),
                                                                                     default=0.0))
    if no_retry:
        note += "; %d 429s without Retry-After" % no_retry
    if other:
        note += "; others: %s" % ", ".join(sorted(set(other))[:3])
    return one("256 requests, queue 4", ">=128 429 + 200s", "%d x 429, %d x 200, %d other" %
               (len(n429), len(n200), len(other)), ok, note)


def case_cancel(server, n=64):
    # The pages gauge shows after the first engine step: one short request first.
    warm = outcome(lambda: post_json(server.port, "/v1/completions", {"prompt": "Once", "max_tokens": 2}))
    if isinstance(warm, str) or warm.status != 200:
        return one("64 clients leave", "pages freed", "warm-up request: " + status_text(warm), False)
    before = metrics(server.port)
    idle_pages = before.get("dsv4_cache_pages_free")
    cancelled = 'dsv4_requests_finished_total{reason="cancelled"}'
    if idle_pages is None:
        return one("64 clients leave", "pages freed", "no dsv4_cache_pages_free in /metrics", False)
    req = build_request(server.port, "POST", "/v1/completions",
                        json.dumps({"prompt": "Once", "max_tokens": 4000, "ignore_eos": True}).encode())
    socks, failed = connect_many(server.port, n, 0, time.monotonic() + 5)
    for s in socks:
        try:
            s.settimeout(2.0)
            s.sendall(req)
        except OSError:
            failed += 1
    time.sleep(0.1)
    for s in socks:
        s.close()
    # Within 10 s: nothing running or queued and the pages back, twice 0.5 s apart.
    deadline, settled, m = time.monotonic() + 10, 0, {}
    while time.monotonic() < deadline and settled < 2:
        time.sleep(0.5)
        m = metrics(server.port)
        idle_now = (m.get("dsv4_requests_running") == 0 and m.get("dsv4_requests_queued") == 0
                    and m.get("dsv4_cache_pages_free") == idle_pages)
        settled = settled + 1 if idle_now else 0
    n_cancelled = m.get(cancelled, 0) - before.get(cancelled, 0)
    shown = ["%g" % m[k] if k in m else "?" for k in
             ("dsv4_requests_running", "dsv4_requests_queued", "dsv4_cache_pages_free")]
    got = "running %s, queued %s, pages free %s/%g" % (shown[0], shown[1], shown[2], idle_pages)
    return one("64 clients leave after 100 ms", "0, 0, idle pages", got, settled >= 2 and n_cancelled >= 1 and not failed,
               "%g cancelled%s" % (n_cancelled, ", %d failed to connect/send" % failed if failed else ""))


def case_origin_host(server):
    body = json.dumps({"prompt": "hi", "max_tokens": 1}).encode()
    r = outcome(lambda: request(server.port, "POST", "/v1/completions", body, src=attack_source(0),
                                content_type="text/plain", headers=[("Origin", "http://evil.example")]))
    rows = one("cross-origin text/plain POST", "415|403", status_text(r),
               not isinstance(r, str) and r.status in (403, 415))
    r = outcome(lambda: request(server.port, "POST", "/v1/completions", body, src=attack_source(0),
                                host="evil.example"))
    rows += one("Host: evil.example", "421", status_text(r), not isinstance(r, str) and r.status == 421)
    return rows


def raw_exchange(server, data, timeout=5.0):
    """Sends data on one connection from an attacking address and reads until the server closes
    (or the deadline); returns [(status, reason)] of every response in what came back, or a
    failure text."""
    deadline = time.monotonic() + timeout

    def run():
        sock = connect(server.port, attack_source(0), deadline)
        try:
            sock.sendall(data)
            r = Reader(sock, deadline)
            try:
                while r.fill():
                    pass
            except HttpFailure as e:
                if str(e) != "reset" or not r.buf:
                    raise
            return bytes(r.buf)
        finally:
            sock.close()

    got = outcome(run)
    if isinstance(got, str):
        return got
    # A response may follow the previous body's last byte directly: status lines anywhere.
    return [(int(m.group(1)), m.group(0)) for m in re.finditer(rb"HTTP/1\.[01] (\d{3}) ", got)]


def one_400(responses):
    return not isinstance(responses, str) and [s for s, _ in responses] == [400]


def shown(responses):
    return responses if isinstance(responses, str) else " + ".join(str(s) for s, _ in responses) or "no response"


def case_framing(server):
    host = "Host: 127.0.0.1:%d\r\n" % server.port
    smuggled = ("GET /metrics HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n").encode()
    body = b'{"prompt": "hi", "max_tokens": 1}'
    post = "POST /v1/completions HTTP/1.1\r\n" + host + "Content-Type: application/json\r\n"
    chunked_body = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    tries = [
        ("TE gzip, smuggled GET /metrics", ("GET /health HTTP/1.1\r\n" + host +
                                            "Transfer-Encoding: gzip\r\n\r\n").encode() + smuggled),
        ("TE chunked, identity", (post + "Transfer-Encoding: chunked, identity\r\n\r\n").encode() + chunked_body),
        ("TE chunked on two lines", (post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n")
         .encode() + chunked_body),
        ("two Host fields", ("GET /health HTTP/1.1\r\n" + host + "Host: evil.example\r\n"
                             "Connection: close\r\n\r\n").encode()),
        ("chunk size zz", (post + "Transfer-Encoding: chunked\r\n\r\n").encode() + b"zz\r\n" + body + b"\r\n0\r\n\r\n"),
    ]
    rows = []
    for check, data in tries:
        got = raw_exchange(server, data)
        rows += one(check, "one 400, closed", shown(got), one_400(got))
    return rows


def case_huge_messages(server):
    n = (8 * MiB - 32) // 3
    body = b'{"messages": [' + b"{}," * (n - 1) + b"{}]}"
    r = outcome(lambda: request(server.port, "POST", "/v1/chat/completions", body, src=attack_source(0),
                                timeout=20.0))
    return one("8 MiB [{},{},...] messages", "400", status_text(r), not isinstance(r, str) and r.status == 400,
               "%d values, %.1f MiB" % (n, len(body) / MiB))


def case_huge_prompt(server):
    n = 4 * MiB
    body = b'{"prompt": [' + b"1," * (n - 1) + b"1]}"
    r = outcome(lambda: request(server.port, "POST", "/v1/completions", body, src=attack_source(0), timeout=20.0))
    return one("prompt of 4 M token ids", "400", status_text(r), not isinstance(r, str) and r.status == 400,
               "%.1f MiB" % (len(body) / MiB))


def many_keys_arguments(n):
    return "{" + ", ".join('"k%07d": 0' % i for i in range(n)) + "}"


def case_many_key_arguments(server):
    args = many_keys_arguments(60000)
    chat = {"messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": args}}]},
                         {"role": "tool", "content": "r"}], "max_tokens": 1}
    rows = []
    for path, want in (("/v1/chat/completions", 400), ("/tokenize", 200)):  # /tokenize has no context bound
        body = dict(chat)
        if path == "/tokenize":
            del body["max_tokens"]
        t0 = time.monotonic()
        r = outcome(lambda: post_json(server.port, path, body, src=attack_source(0), timeout=20.0))
        took = time.monotonic() - t0
        rows += one("60,000-key arguments to " + path, "%d in < 10 s" % want, "%s in %.1f s" % (status_text(r), took),
                    not isinstance(r, str) and r.status == want and took < 10, "%.2f MB" % (len(args) / 1e6))
    return rows


def case_many_keys_body(server):
    body = ("{" + ", ".join('"k%07d": 0' % i for i in range(50000)) + "}").encode()
    t0 = time.monotonic()
    r = outcome(lambda: request(server.port, "POST", "/v1/completions", body, src=attack_source(0), timeout=20.0))
    took = time.monotonic() - t0
    return one("a body of 50,000 keys", "400 in < 5 s", "%s in %.1f s" % (status_text(r), took),
               not isinstance(r, str) and r.status == 400 and took < 5, "%.2f MB" % (len(body) / 1e6))


def case_pending_budget(server, n=8):
    """Requests that run 3.2 s each hold their charge (>= 64 KiB) against --max-pending-bytes 256 KiB."""
    body = json.dumps({"prompt": "Once", "max_tokens": 64, "ignore_eos": True}).encode()

    def client(i):
        return outcome(lambda: request(server.port, "POST", "/v1/completions", body, src=attack_source(i), timeout=30.0))

    results = run_concurrently([lambda i=i: client(i) for i in range(n)], 40.0)
    got = [status_text(r) if r is not None else "hung" for r in results]
    n503 = [r for r in results if r is not None and not isinstance(r, str) and r.status == 503
            and r.error_code() == "server_overloaded" and "retry-after" in r.headers]
    n200 = [r for r in results if r is not None and not isinstance(r, str) and r.status == 200]
    ok = len(n503) + len(n200) == n and len(n503) >= n // 2 and len(n200) >= 1
    return one("8 requests, budget of 4 charges", ">=4 503 server_overloaded + 200s",
               "%d x 503, %d x 200" % (len(n503), len(n200)), ok, ", ".join(sorted(set(got))))


def case_long_stops(server, n=8):
    body = json.dumps({"prompt": "hi", "max_tokens": 1, "n": 8,
                       "stop": [chr(ord("a") + i) * (2 * 1000 * 1000) for i in range(4)]}).encode()
    def client(i):
        return outcome(lambda: request(server.port, "POST", "/v1/completions", body, src=attack_source(i), timeout=30.0))

    results = run_concurrently([lambda i=i: client(i) for i in range(n)], timeout=60)
    codes = [r.error_code() if not isinstance(r, (str, type(None))) and r.status == 400 else status_text(r) if r else "-"
             for r in results]
    ok = all(c == "field_too_large" for c in codes)
    return one("8 x n 8 with four 2 MB stops", "400 field_too_large", ",".join(sorted(set(codes))), ok,
               "%.1f MB each" % (len(body) / 1e6))


class Case:
    def __init__(self, number, server, fn, rss_bound_mib=None, health_bound_s=None):
        self.number, self.server, self.fn = number, server, fn
        self.rss_bound_mib, self.health_bound_s = rss_bound_mib, health_bound_s


SERVERS = {  # name: (model, serve flags)
    "main": ("tiny", ["--max-context", "256", "--batch-size", "4"]),
    "big": ("tiny", ["--max-context", "256", "--batch-size", "4", "--max-body-bytes", "16777216"]),
    "conn": ("tiny", ["--max-context", "256", "--batch-size", "8", "--max-connections", "4096",
                      "--read-timeout", str(SLOW_READ_TIMEOUT), "--idle-timeout", "60"]),
    "queue": ("tiny", ["--max-context", "256", "--max-queue", "4", "--batch-size", "2",
                       "--test-min-step-seconds", "0.05"]),
    "budget": ("tiny", ["--max-context", "256", "--batch-size", "2", "--test-min-step-seconds", "0.05",
                        "--max-pending-bytes", "262144"]),
    "cancel": ("tiny4k", ["--max-context", "4096", "--batch-size", "8", "--test-min-step-seconds", "0.01"]),
}

CASES = [  # in run order, grouped by server
    Case(3, "main", case_many_headers),
    Case(7, "main", case_origin_host),
    Case(1, "main", case_chunked_gigabyte, rss_bound_mib=64),
    Case(2, "main", case_endless_body, rss_bound_mib=64),
    Case(9, "main", case_chunk_extension, rss_bound_mib=64),
    Case(9, "main", case_endless_trailer, rss_bound_mib=64),
    Case(10, "main", case_framing),
    Case(8, "big", case_huge_messages, rss_bound_mib=64),
    Case(8, "big", case_huge_prompt, rss_bound_mib=64),
    Case(11, "big", case_many_key_arguments, health_bound_s=1.0),
    Case(11, "big", case_many_keys_body, health_bound_s=1.0),
    Case(11, "big", case_long_stops, rss_bound_mib=160),
    Case(11, "budget", case_pending_budget),
    Case(4, "conn", case_slowloris, health_bound_s=1.0),
    Case(5, "queue", case_queue_flood),
    Case(6, "cancel", case_cancel),
]


def run_case(case, server):
    """Rows of (case, check, expected, got, ok, rss growth, peak growth, health, note)."""
    if not server.alive():
        why = server.error or "server %s is not running (exit %s)" % (server.name, server.proc.poll())
        return [(case.number, case.fn.__name__[5:], "-", "not run", False, None, None, "", why)]
    before = rss_kib(server.pid)
    sampler, prober = RssSampler(server.pid), HealthProber(server.port)
    try:
        rows = case.fn(server)
    except Exception as e:  # a bug in the case itself: report it as a failure, keep going
        rows = one(case.fn.__name__[5:], "-", "error", False, "%s: %s" % (type(e).__name__, e))
    peak = sampler.stop()
    latencies = prober.stop()
    after = rss_kib(server.pid)
    growth = (after - before) / 1024 if after and before else None
    peak_growth = (peak - before) / 1024 if before else None
    worst = max(latencies, default=0.0)
    failed_probes = sum(1 for t in latencies if t == float("inf"))
    health = ("%d failed" % failed_probes if failed_probes else "%.3fs" % worst) if latencies else "-"
    out = []
    for check, expected, got, ok, note in rows:
        notes = [note] if note else []
        if case.rss_bound_mib is not None:
            expected += ", rss<%d" % case.rss_bound_mib
            if peak_growth is None or peak_growth >= case.rss_bound_mib:
                ok = False
                notes.append("RSS grew past %d MiB" % case.rss_bound_mib)
        if case.health_bound_s is not None:
            expected += ", health<%gs" % case.health_bound_s
            if not latencies or worst >= case.health_bound_s:
                ok = False
                notes.append("/health slower than %gs or failed" % case.health_bound_s)
        if not server.alive():
            ok = False
            notes.append("server died (exit %s)" % server.proc.poll())
        out.append((case.number, check, expected, got, ok, growth, peak_growth, health, "; ".join(notes)))
    return out


def print_table(rows):
    def mib(v):
        return "-" if v is None else "%.1f" % v

    table = [("case", "check", "expected", "got", "result", "rss+MiB", "peak+MiB", "health max", "note")]
    for number, check, expected, got, ok, growth, peak, health, note in sorted(rows, key=lambda r: r[0]):
        table.append((str(number), check, expected, got, "ok" if ok else "FAIL", mib(growth), mib(peak), health, note))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])


def main(argv):
    if len(argv) < 3:
        print(__doc__.split("\n\n")[1])
        return 2
    dsv4, work = argv[1], argv[2]
    only = {int(a) for a in argv[3:]}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.makedirs(work, exist_ok=True)
    for model, extra in (("tiny", []), ("tiny4k", ["--max-position", "4096"])):
        path = os.path.join(work, model)
        if not os.path.exists(os.path.join(path, "config.json")):
            done = subprocess.run([dsv4, "make-tiny", "--out", path] + extra, capture_output=True, timeout=120)
            if done.returncode != 0:
                print(done.stdout.decode() + done.stderr.decode())
                return 1

    t0 = time.monotonic()
    rows, server = [], None
    for case in CASES:
        if only and case.number not in only:
            continue
        if server is None or server.name != case.server:
            if server:
                server.stop()
            model, flags = SERVERS[case.server]
            server = Server(dsv4, work, case.server, ["--model", os.path.join(work, model)] + flags)
            server.start()
        start = time.monotonic()
        if start - t0 > 170:
            rows.append((case.number, case.fn.__name__[5:], "-", "not run", False, None, None, "", "time budget spent"))
            continue
        new = run_case(case, server)
        rows += new
        for r in new:
            print("case %d %-32s %-6s %s (%.1fs)" % (r[0], r[1], "ok" if r[4] else "FAIL", r[3], time.monotonic() - start),
                  flush=True)
    if server:
        server.stop()
    print()
    print_table(rows)
    failed = sum(1 for r in rows if not r[4])
    print("\nserver_attacks: %s (%.0fs)" % ("%d of %d checks failed" % (failed, len(rows)) if failed else
                                         "all %d checks passed" % len(rows), time.monotonic() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
