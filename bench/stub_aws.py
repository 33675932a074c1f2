"""A fast stub AWS endpoint for measuring the consumer's own floor: canned answers, keep-alive connections, and a
fixed round trip per service. It answers only what a first send needs (DynamoDB PutItem and UpdateItem, SESv2
SendEmail, SQS SendMessage) and what the SQL outbox's relay sends (SQS SendMessageBatch, every entry accepted), and
keeps no state, so every claim wins.

Run it in its own process (``python bench/stub_aws.py dynamodb=5 sesv2=60``): it prints its endpoint and serves
until killed. One asyncio loop, no HTTP framework: its own cost per request stays far below the round trips it
injects, so what a batch takes beyond them is the consumer's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid


def _answer(path: bytes, target: bytes, request: bytes) -> tuple[str, bytes]:
    if target.endswith(b"SendMessageBatch"):
        entries = json.loads(request)["Entries"]
        return "sqs", json.dumps({"Successful": [{"Id": entry["Id"], "MessageId": uuid.uuid4().hex,
                                                  "MD5OfMessageBody": ""} for entry in entries]}).encode()
    if target.startswith(b"DynamoDB"):
        body = {"Attributes": {"attempts": {"N": "1"}}} if target.endswith(b"UpdateItem") else {}
        return "dynamodb", json.dumps(body).encode()
    if path.startswith(b"/v2/email/outbound-emails"):
        return "sesv2", json.dumps({"MessageId": uuid.uuid4().hex}).encode()
    return "sqs", json.dumps({"MessageId": uuid.uuid4().hex, "MD5OfMessageBody": ""}).encode()


async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            delays_ms: dict[str, float]) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.split(b"\r\n")
            headers = {}
            for line in header_lines:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
            request = await reader.readexactly(int(headers.get(b"content-length", b"0")))
            service, body = _answer(request_line.split(b" ")[1], headers.get(b"x-amz-target", b""), request)
            await asyncio.sleep(delays_ms.get(service, 0.0) / 1000)  # the injected round trip
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _main(delays_ms: dict[str, float]) -> None:
    server = await asyncio.start_server(lambda r, w: _serve_connection(r, w, delays_ms), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    delays = {name: float(ms) for name, _, ms in (arg.partition("=") for arg in sys.argv[1:])}
    asyncio.run(_main(delays))


if __name__ == "__main__":
    main()
