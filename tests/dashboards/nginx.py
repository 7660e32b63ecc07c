"""A real nginx (Debian's) in front of the dashboard as the authenticating proxy of docs/deploy.md:
HTTP basic authentication, then the user and their groups passed on in X-Forwarded-* headers
(whatever the client sent under those names is replaced), with the proxy's shared secret if given."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from browser import Server, free_port

CONF = """
worker_processes 1;
error_log {root}/error.log;
pid {root}/nginx.pid;
daemon off;
{user}
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {root}/body; proxy_temp_path {root}/proxy; fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi; scgi_temp_path {root}/scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    map $remote_user $groups {{ {groups} default ""; }}
    server {{
        listen 127.0.0.1:{port};
        location = /health {{ return 200 "ok"; }}
        location / {{
            auth_basic "preemptlens";
            auth_basic_user_file {root}/htpasswd;
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-User $remote_user;
            proxy_set_header X-Forwarded-Groups $groups;
            proxy_set_header X-Forwarded-Email "";
            proxy_set_header Authorization "";
            {secret}
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


class Nginx(Server):
    """nginx on a free loopback port in front of 127.0.0.1:`upstream`, with `users` (name -> password)
    and `groups` (name -> comma-separated groups)."""

    def __init__(self, root: Path, upstream: int, users: dict[str, str], groups: dict[str, str],
                 secret: str | None = None) -> None:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(binary).exists():
            raise FileNotFoundError("nginx is not installed (tests/run.sh installs it)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.upstream = f"http://127.0.0.1:{upstream}"
        root.mkdir(parents=True, exist_ok=True)
        # nginx's {PLAIN} scheme: the test's passwords need no hashing tool.
        (root / "htpasswd").write_text("".join(f"{u}:{{PLAIN}}{p}\n" for u, p in users.items()))
        conf = root / "nginx.conf"
        conf.write_text(CONF.format(
            root=root, port=self.port, upstream=upstream,
            # As root its workers would run as nobody, who cannot enter pytest's private temporary folders.
            user="user root;" if os.geteuid() == 0 else "",
            groups=" ".join(f'"{u}" "{g}";' for u, g in groups.items()),
            secret=f'proxy_set_header X-Preemptlens-Proxy-Secret "{secret}";' if secret else "",
        ))
        self.log = root / "error.log"
        self.start([binary, "-p", str(root), "-c", str(conf)], root / "stdout.log", f"{self.url}/health", 20)
