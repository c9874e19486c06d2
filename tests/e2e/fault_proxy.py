"""A TCP listener on loopback in front of a real server, for the upstream tests (issue 45):
it relays bytes both ways (optionally as the TLS end, with a certificate made by
make_certs), or injects a fault: 'stall' reads the request and never answers, '500'
answers HTTP 500. Counts the connections it accepted, so a test can see a retry. Standard
library only, plus the openssl CLI for the certificates."""
import os
import socket
import ssl
import subprocess
import threading


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(directory):
    """A CA, a server certificate it signs for localhost and 127.0.0.1, and a second CA that
    signs nothing here. Returns (ca.pem, other-ca.pem, server.pem, server.key)."""
    for name in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=hearth test " + name,
                 "-keyout", name + ".key", "-out", name + ".pem", cwd=directory)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
             "-out", "server.csr", cwd=directory)
    with open(os.path.join(directory, "san.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.ext", "-out", "server.pem", cwd=directory)
    return tuple(os.path.join(directory, n) for n in ("ca.pem", "other-ca.pem", "server.pem", "server.key"))


def _pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return None
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(body) < length:
        piece = conn.recv(65536)
        if not piece:
            break
        body += piece
    return head


class FaultProxy:
    def __init__(self, target_port, mode="pass", cert=None, key=None):
        self.target_port, self.mode = target_port, mode
        self.connections = 0
        self.tls = None
        if cert:
            self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.tls.load_cert_chain(cert, key)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.open = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            if self.tls:
                conn = self.tls.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError):
            conn.close()
            return
        self.open.append(conn)
        try:
            if self.mode == "pass":
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
                self.open.append(upstream)
                threading.Thread(target=_pump, args=(upstream, conn), daemon=True).start()
                _pump(conn, upstream)
            elif self.mode == "stall":
                _read_request(conn)
                while conn.recv(65536):
                    pass
            elif self.mode == "500":
                if _read_request(conn) is not None:
                    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.listener.close()
        for s in self.open:
            try:
                s.close()
            except OSError:
                pass
