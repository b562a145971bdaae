"""The model registry's routes as a plain router on the server's app (routes/models.py):
errors of the registry answered by the app's handlers (404, 409), and a version whose
metrics hold NaN stored and answered like every other route's JSON (it was a 500)."""

from __future__ import annotations

import asyncio
import base64
import io
import tarfile

import httpx

from tandem.server import ServerConfig, TrainServer, create_app

AUTH = {"Authorization": "Bearer models-token"}


def _files() -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("model.pkl")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    return base64.b64encode(buf.getvalue()).decode()


def test_registry_routes_answer_through_the_app(tmp_path):
    server = TrainServer(ServerConfig(storage=str(tmp_path), num_cpus=1, usage_interval_s=0))
    try:
        app = create_app(server, "models-token")

        async def go() -> list[httpx.Response]:
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                body = '{"meta": {"metrics": {"loss": NaN}}, "files": "%s"}' % _files()
                return [
                    await c.post("/api/models/m/versions", content=body.encode(),
                                 headers={**AUTH, "content-type": "application/json"}),
                    await c.put("/api/models/m/aliases/prod", json={"version": 1}, headers=AUTH),
                    await c.get("/api/models/nope", headers=AUTH),
                    await c.delete("/api/models/m/versions/1", headers=AUTH),
                    await c.get("/api/models/m/versions/prod", headers=AUTH),
                ]

        put, alias, missing, refused, got = asyncio.run(go())
        assert put.status_code == 201 and '"loss":NaN' in put.text.replace(" ", ""), put.text
        assert alias.status_code == 200, alias.text
        assert missing.status_code == 404 and "Registered models: m" in missing.json()["detail"]
        assert refused.status_code == 409 and "prod" in refused.json()["detail"], refused.text
        assert got.status_code == 200 and got.json()["version"] == 1
    finally:
        server.close()
