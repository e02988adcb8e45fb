# A new TCP connection to ADDR:PORT every INTERVAL_MS, each in its own
# thread with a TIMEOUT_S bound: connect, read one line. Writes
#   S seq start_ms            when an attempt starts
#   E seq end_ms ok NAME      the line read (the server's name)
#   E seq end_ms fail WHY     refused, timed out, reset, no line
# to OUT, one line each, flushed.
import socket, sys, threading, time

addr, port, interval, timeout, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
f = open(out, "a", buffering=1)
lock = threading.Lock()

def write(line):
    with lock:
        f.write(line + "\n")

def attempt(seq):
    try:
        with socket.create_connection((addr, port), timeout=timeout) as c:
            c.settimeout(timeout)
            data = b""
            while not data.endswith(b"\n"):
                chunk = c.recv(64)
                if not chunk:
                    break
                data += chunk
        if data.endswith(b"\n"):
            write("E %d %d ok %s" % (seq, time.time() * 1000, data.decode().strip()))
        else:
            write("E %d %d fail closed-without-a-line" % (seq, time.time() * 1000))
    except Exception as e:
        write("E %d %d fail %s" % (seq, time.time() * 1000, type(e).__name__ + ":" + str(e).replace(" ", "_")))

seq = 0
next_at = time.time()
while True:
    write("S %d %d" % (seq, time.time() * 1000))
    threading.Thread(target=attempt, args=(seq,), daemon=True).start()
    seq += 1
    next_at += interval / 1000.0
    pause = next_at - time.time()
    if pause > 0:
        time.sleep(pause)
    else:
        next_at = time.time()
