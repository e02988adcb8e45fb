# The ExaBGP API process of a testlab lab (run by ExaBGP, one per instance).
#
# ExaBGP -> us (stdin): one JSON object per BGP message or state change,
# appended to RECEIVED; the "done"/"error" acknowledgements of our commands
# (exabgp.api.ack) are appended to ACKS.
#
# us -> ExaBGP (stdout): lines appended to the COMMANDS file by the test are
# forwarded as API commands. The offset of what was forwarded is kept in
# OFFSET, so a respawned helper neither replays nor skips commands.
import sys
import threading
import time

received_path, acks_path, commands_path, offset_path = sys.argv[1:5]


def read_offset():
    try:
        with open(offset_path) as f:
            return int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def forward_commands():
    offset = read_offset()
    while True:
        try:
            with open(commands_path, 'rb') as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            data = b''
        end = data.rfind(b'\n')
        if end >= 0:
            chunk = data[: end + 1]
            sys.stdout.write(chunk.decode())
            sys.stdout.flush()
            offset += len(chunk)
            with open(offset_path, 'w') as f:
                f.write(str(offset))
        time.sleep(0.02)


threading.Thread(target=forward_commands, daemon=True).start()
with open(received_path, 'a') as received, open(acks_path, 'a') as acks:
    for line in sys.stdin:
        out = received if line.startswith('{') else acks
        out.write(line)
        out.flush()
