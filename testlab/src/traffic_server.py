# One line with the server's name to every connection, then close.
import socket, sys, threading

addr, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode() + b"\n"
s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(1024)
print("listening", flush=True)

def serve(c):
    try:
        c.sendall(name)
    except OSError:
        pass
    finally:
        c.close()

while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
