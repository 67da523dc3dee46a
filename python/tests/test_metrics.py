# SPDX-License-Identifier: MIT
"""infeedd's Prometheus metrics: scraped by a real Prometheus server,
checked by promtool, the data wait of a slow and a fast trainer, and HTTP
clients that misbehave without touching the trainers."""

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

import infeed

np = pytest.importorskip("numpy")


def scrape(d):
    url = f"http://127.0.0.1:{d.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        return r.read().decode()


def sample(text, name, **labels):
    """The value of series @name whose labels include @labels."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    raise AssertionError(f"no {name} {labels} in:\n{text}")


def scalar(text, name):
    """The value of the unlabelled series @name."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in:\n{text}")


def run_trainer(d, dataset, name, steps, think):
    loader = infeed.DataLoader(None, dataset, batch_size=10, output="numpy",
                               socket=d.socket, client_name=name)
    it = iter(loader)
    for _ in range(steps):
        time.sleep(think)
        next(it)
    return loader        # kept: its session stays live


@pytest.mark.no_group_window
def test_data_wait_of_a_starved_and_a_thinking_trainer(metrics_daemon):
    d = metrics_daemon
    thinker = run_trainer(d, "raw", "thinker", 15, 0.02)
    starved = run_trainer(d, "slow", "starved", 15, 0)
    text = scrape(d)
    s = {"client": "starved", "dataset": "slow"}
    t = {"client": "thinker", "dataset": "raw"}
    bound_s = (sample(text, "infeed_data_wait_seconds_total", **s) /
               sample(text, "infeed_active_seconds_total", **s))
    bound_t = (sample(text, "infeed_data_wait_seconds_total", **t) /
               sample(text, "infeed_active_seconds_total", **t))
    assert bound_s > 0.7, text
    assert bound_t < 0.2, text
    assert sample(text, "infeed_steps_delivered_total", **s) == 15
    assert sample(text, "infeed_read_bytes_total", **s) >= 15 * 10 * 16
    assert sample(text, "infeed_next_wait_seconds_count", **s) == 15
    assert sample(text, "infeed_next_wait_seconds_bucket", le="+Inf",
                  **t) == 15
    assert sample(text, "infeed_ring_slots", state="all", **t) == 3
    # An ended session folds into its dataset's totals.
    starved.close()
    del starved
    text = scrape(d)
    assert sample(text, "infeed_steps_delivered_total", dataset="slow",
                  session="ended") == 15
    assert "starved" not in text
    if shutil.which("promtool"):
        out = subprocess.run(["promtool", "check", "metrics"], input=text,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
    thinker.close()


@pytest.mark.no_group_window
def test_a_group_counts_the_member_that_left(metrics_daemon):
    d = metrics_daemon
    loaders = [infeed.DataLoader(None, "raw", batch_size=10, output="numpy",
                                 socket=d.socket, client_name=name)
               for name in ("runner", "stopper")]
    its = [iter(x) for x in loaders]
    for _ in range(3):
        for it in its:
            next(it)
    text = scrape(d)
    group = sample(text, "infeed_group_members", client="runner")
    assert group == 2, text
    # The stopper holds its step past the slack: it leaves, held_back.
    for _ in range(12):
        next(its[0])
    text = scrape(d)
    g = next(line.split('group="')[1].split('"')[0]
             for line in text.splitlines()
             if line.startswith("infeed_group_members{") and
             'client="runner"' in line)
    assert sample(text, "infeed_group_leaves_total", group=g,
                  reason="held_back") == 1, text
    assert sample(text, "infeed_group_leaves_total", group=g,
                  reason="waited") == 0, text
    assert sample(text, "infeed_group_stays_total", group=g) == 0, text
    assert sample(text, "infeed_group_rejoins_total", group=g) == 0, text
    assert "# TYPE infeed_group_leaves_total counter" in text
    if shutil.which("promtool"):
        out = subprocess.run(["promtool", "check", "metrics"], input=text,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
    for x in loaders:
        x.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="needs Debian's prometheus")
def test_a_real_prometheus_scrapes_the_data_wait(metrics_daemon, tmp_path):
    d = metrics_daemon
    trainer = run_trainer(d, "slow", "starved", 10, 0)
    port = free_port()
    conf = tmp_path / "prometheus.yml"
    conf.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: infeedd\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{d.metrics_port}']\n")
    prom = subprocess.Popen(
        ["prometheus", f"--config.file={conf}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    query = (f"http://127.0.0.1:{port}/api/v1/query?query="
             "infeed_data_wait_seconds_total")
    try:
        result = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not result:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(query, timeout=5) as r:
                    result = json.load(r)["data"]["result"]
            except OSError:
                continue
        assert result, "Prometheus never stored the data-wait series"
        series = [x for x in result if x["metric"].get("client") ==
                  "starved"]
        assert series and series[0]["metric"]["job"] == "infeedd"
        assert float(series[0]["value"][1]) > 0
    finally:
        prom.terminate()
        prom.wait(timeout=30)
    trainer.close()


def test_bad_http_clients_do_not_touch_trainers(metrics_daemon):
    d = metrics_daemon
    addr = ("127.0.0.1", d.metrics_port)

    def ask(data):
        with socket.create_connection(addr, timeout=10) as s:
            s.sendall(data)
            return s.recv(4096)
    assert ask(b"\x00\xffgarbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert ask(b"POST /metrics HTTP/1.1\r\nHost: x\r\n"
               b"Content-Length: 3\r\n\r\nabc").startswith(b"HTTP/1.1 4")
    assert b" 501 " in ask(b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b" 404 " in ask(b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n")
    huge = b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 100000 + b"\r\n\r\n"
    reply = b""
    try:
        reply = ask(huge)
    except OSError:
        pass                    # closed on us: also a refusal
    assert not reply.startswith(b"HTTP/1.1 200"), reply[:100]
    # Slowloris: connections that send half a request and wait.
    slow = []
    for _ in range(50):
        s = socket.create_connection(addr, timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    t = time.monotonic()
    loader = infeed.DataLoader(None, "raw", batch_size=10, output="numpy",
                               socket=d.socket)
    steps = sum(1 for _ in loader)
    assert steps == len(loader)
    assert time.monotonic() - t < 5, "trainers waited on HTTP clients"
    assert "infeed_clients" in scrape(d)    # scrapes still served
    # infeedd closes the half-requests after its 5 s timeout.
    time.sleep(6.5)
    closed = 0
    for s in slow:
        s.settimeout(1)
        try:
            s.recv(100)         # EOF (or an error reply), not a wait
            closed += 1
        except socket.timeout:
            pass
        except OSError:
            closed += 1
        s.close()
    assert closed == 50
    loader.close()


def test_worker_deaths_show_as_restarts_and_reissued_rows(metrics_daemon):
    d = metrics_daemon
    loader = infeed.DataLoader(None, "slow", batch_size=10, output="numpy",
                               socket=d.socket, client_name="victim")
    seen = []
    for attempt in range(5):
        for step in loader:         # workers busy all the time
            seen.append(step.indices.copy())
            if len(seen) % 20 == 5:
                # The workers are the children of the fork server.
                forker = subprocess.run(
                    ["pgrep", "-d,", "-P", str(d.proc.pid)],
                    capture_output=True, text=True).stdout.strip()
                workers = subprocess.run(
                    ["pgrep", "-P", forker], capture_output=True,
                    text=True).stdout.split()
                for pid in workers:
                    os.kill(int(pid), 9)
        text = scrape(d)
        if scalar(text, "infeed_rows_reissued_total") > 0:
            break
    assert scalar(text, "infeed_rows_reissued_total") > 0
    restarts = sum(float(line.rsplit(" ", 1)[1]) for line in
                   text.splitlines()
                   if line.startswith("infeed_worker_restarts_total{"))
    assert restarts >= 2
    # Every epoch was still delivered whole.
    got = np.concatenate(seen)
    assert len(got) == len(loader) * 10 * (attempt + 1)
    loader.close()


def test_a_reload_moves_stops_and_starts_the_endpoint(metrics_daemon):
    d = metrics_daemon
    old = d.metrics_port
    assert "infeed_" in scrape(d)
    conf = d.conf.read_text()

    def reload_until(text, count):
        d.proc.send_signal(signal.SIGHUP)
        for _ in range(200):
            if d.log_text().count(text) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"no '{text}' in the log:\n{d.log_text()}")

    d.conf.write_text(conf.replace("metrics_listen = 127.0.0.1:0",
                                   "metrics_listen = off"))
    reload_until("reload: metrics are off", 1)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", old), timeout=2).close()

    port = free_port()
    d.conf.write_text(conf.replace("metrics_listen = 127.0.0.1:0",
                                   f"metrics_listen = 127.0.0.1:{port}"))
    reload_until(f"metrics on http://127.0.0.1:{port}/metrics", 1)
    d.metrics_port = port
    assert "infeed_" in scrape(d)

    # An address that cannot be bound: the endpoint stays where it was.
    d.conf.write_text(conf.replace("metrics_listen = 127.0.0.1:0",
                                   "metrics_listen = 192.0.2.1:1"))
    reload_until("reload: metrics stay where they were", 1)
    assert "infeed_" in scrape(d)
