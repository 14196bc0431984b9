"""A local HTTP server speaking the part of the Hugging Face Hub API that uploads use, and one that never answers.

It answers create-repo, model-card YAML validation, pre-upload (every file "regular", i.e. inline base64, never LFS) and
commit, and keeps the files each commit carried, so a test can compare them byte for byte.
"""

import base64
import contextlib
import http.server
import json
import socket
import threading
import time

import yaml


class FakeHub:
  def __init__(self):
    self.repos: dict[str, dict[str, bytes]] = {}
    self.tokens: list[str | None] = []
    self.requests: list[tuple[str, str]] = []
    self.model_card_metadata: dict | None = None
    hub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def _reply(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

      def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

      def do_GET(self):
        hub.requests.append(("GET", self.path))
        self._reply(404, {"error": f"fake hub: no GET {self.path}"})

      def do_POST(self):
        hub.requests.append(("POST", self.path))
        hub.tokens.append(self.headers.get("Authorization"))
        body = self._body()
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:3] == ["api", "repos", "create"]:
          request = json.loads(body)
          repo_id = f"{request['organization']}/{request['name']}" if request.get("organization") else request["name"]
          hub.repos.setdefault(repo_id, {})
          return self._reply(200, {"url": f"{hub.url}/{repo_id}", "name": repo_id})
        if parts == ["api", "validate-yaml"]:
          content = json.loads(body)["content"]
          try:
            hub.model_card_metadata = yaml.safe_load(content.split("---")[1])
          except (IndexError, yaml.YAMLError) as e:
            return self._reply(400, {"error": f"invalid model card YAML: {e}"})
          return self._reply(200, {"errors": [], "warnings": []})
        if parts[:2] == ["api", "models"] and "preupload" in parts:
          files = json.loads(body)["files"]
          return self._reply(
            200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
          )
        if parts[:2] == ["api", "models"] and "commit" in parts:
          repo_id = "/".join(parts[2 : parts.index("commit")])
          for line in body.decode().splitlines():
            item = json.loads(line)
            if item["key"] == "file":
              value = item["value"]
              hub.repos.setdefault(repo_id, {})[value["path"]] = base64.b64decode(value["content"])
          return self._reply(
            200, {"commitUrl": f"{hub.url}/{repo_id}/commit/1", "commitOid": "0" * 40, "pullRequestUrl": None}
          )
        self._reply(404, {"error": f"fake hub: no POST {self.path}"})

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
    self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self.server.shutdown()
    self.server.server_close()


class StalledHub:
  """An endpoint that accepts every connection and never answers (a stalled proxy), for `seconds` at most.

  Leaving the `with` block, or the time running out, closes the connections and the listening socket.
  """

  def __init__(self, seconds: float = 30):
    self._listener = socket.create_server(("127.0.0.1", 0))
    self._listener.settimeout(0.1)
    self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
    self.connections: list[socket.socket] = []
    self._deadline = time.monotonic() + seconds
    self._done = threading.Event()
    self._thread = threading.Thread(target=self._hold, daemon=True)

  def _hold(self):
    while not self._done.is_set() and time.monotonic() < self._deadline:
      with contextlib.suppress(TimeoutError):
        self.connections.append(self._listener.accept()[0])
    for connection in self.connections:
      connection.close()
    self._listener.close()

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._done.set()
    self._thread.join()
