"""The floor ``archmax sessions`` is held to, as a process: a Python process that imports the
Temporal SDK's client, connects, lists one page of a query and prints each workflow id.

``python bench/sdk_list.py <address> <namespace> <query> <limit>`` (run by :mod:`bench.cli`,
timed from outside beside ``archmax sessions``); it imports nothing of this project."""

from __future__ import annotations

import asyncio
import sys

from temporalio.client import Client


async def main(address: str, namespace: str, query: str, limit: int) -> None:
    client = await Client.connect(address, namespace=namespace)
    async for execution in client.list_workflows(query, limit=limit):
        print(execution.id)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
