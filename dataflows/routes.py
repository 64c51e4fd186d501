"""The routes of ``folio serve``'s HTTP API as FastAPI routers, one per part of the API: ``books`` (the
library's books, chapters, chunks, page images, removal), ``search`` (search, ask, concepts), ``kiwix``
(the ZIM archives) and ``admin`` (health, version, ingest and its jobs). ``dataflows.server`` includes
them in its application; the routes and their behaviour are documented there.

Each route answers from the ``Service`` and the ``--books`` folders the application holds
(``app.state.service``, ``app.state.ingest_roots``), its blocking work on the server's thread pool, and
declares its response model (``dataflows.api_models``); a JSON response carries exactly the fields the
service gave (``response_model_exclude_unset``).

Config: none. Limitations: see ``dataflows.server``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from folio.dataflows import api_models as m
from folio.dataflows.http_guard import allowed_ingest_paths
from folio.dataflows.service import Service, version

EVENT_INTERVAL_S = 0.25  # how often a job's event stream reports progress


def _service(request: Request) -> Service:
    service: Service = request.app.state.service  # set by ``dataflows.server.create_app``
    return service


def _roots(request: Request) -> tuple[Path, ...]:
    roots: tuple[Path, ...] = request.app.state.ingest_roots  # the ``--books`` folders
    return roots


ServiceDep = Annotated[Service, Depends(_service)]
FiltersQuery = Annotated[m.BookFilters, Query()]


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """Run a blocking service call on the server's thread pool."""
    return run_in_threadpool(fn, *args, **kwargs)


# --- books ---------------------------------------------------------------------------------------------
books = APIRouter(prefix="/api/books", tags=["books"])


@books.get("", response_model=list[m.BookRow], response_model_exclude_unset=True)
async def books_route(service: ServiceDep, filters: FiltersQuery) -> Any:
    return await call(service.books, filters.model_dump())


@books.get("/{book}", response_model=m.BookDetail, response_model_exclude_unset=True)
async def book_route(service: ServiceDep, book: str) -> Any:
    return await call(service.book, book)


@books.delete(
    "/{book}",
    status_code=202,
    response_model=m.JobState,
    responses={200: {"model": m.Removal, "description": "?dry_run=true: what would go, nothing changed"}},
    response_model_exclude_unset=True,
)
async def remove_route(service: ServiceDep, book: str, dry_run: bool = False) -> Any:
    if dry_run:  # what would go, nothing changed
        return JSONResponse(await call(service.removal, book))
    job = await call(service.remove, book)
    return job.as_dict()


@books.get("/{book}/chapters/{chapter_id}", response_model=m.Chapter, response_model_exclude_unset=True)
async def chapter_route(service: ServiceDep, book: str, chapter_id: str) -> Any:
    return await call(service.chapter, book, chapter_id)


@books.get(
    "/{book}/pages/{page}.png",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}, "description": "the page with the quote marked"}},
)
async def page_route(service: ServiceDep, book: str, page: str, q: str = "") -> Response:
    return Response(await call(service.page_image, book, page, q), media_type="image/png")


@books.get("/{book}/chunks/{chunk_id}", response_model=m.Hit, response_model_exclude_unset=True)
async def chunk_route(service: ServiceDep, book: str, chunk_id: str) -> Any:
    return await call(service.chunk, book, chunk_id)


# --- search, ask, concepts -----------------------------------------------------------------------------
search = APIRouter(prefix="/api", tags=["search"])


@search.post("/ask", response_model=m.Answer, response_model_exclude_unset=True)
async def ask_route(
    service: ServiceDep,
    question: Annotated[str, Body(embed=True)],
    conversation: Annotated[str | None, Body(embed=True)] = None,
    filters: Annotated[m.BookFilters | None, Body(embed=True)] = None,
) -> Any:
    chosen = filters.model_dump() if filters else None
    return await call(service.ask, question, conversation, chosen)


@search.get("/search", response_model=list[m.Hit], response_model_exclude_unset=True)
async def search_route(
    service: ServiceDep,
    q: str,
    filters: FiltersQuery,
    mode: str | None = None,
    k: int | None = None,
    book: str | None = None,
    chapter: Annotated[list[str] | None, Query()] = None,
) -> Any:
    return await call(
        service.search, q, mode=mode, k=k, book=book, chapters=chapter, filters=filters.model_dump()
    )


@search.get("/concepts", response_model=list[m.ConceptRow], response_model_exclude_unset=True)
async def concepts_route(service: ServiceDep, q: str, book: str | None = None, k: int | None = None) -> Any:
    return await call(service.concepts, q, book, k)


# --- Kiwix ---------------------------------------------------------------------------------------------
kiwix = APIRouter(prefix="/api/kiwix", tags=["kiwix"])


@kiwix.get("/books", response_model=list[m.KiwixBook], response_model_exclude_unset=True)
async def kiwix_books_route(service: ServiceDep) -> Any:
    return await call(service.kiwix_books)


@kiwix.get("/search", response_model=m.KiwixResult, response_model_exclude_unset=True)
async def kiwix_search_route(service: ServiceDep, q: str) -> Any:
    return await call(service.kiwix_search, q)


@kiwix.get("/article", response_model=m.Article, response_model_exclude_unset=True)
async def kiwix_article_route(service: ServiceDep, book: str, path: str) -> Any:
    return await call(service.kiwix_article, book, path)


# --- admin: health, version, ingest, jobs --------------------------------------------------------------
admin = APIRouter(prefix="/api", tags=["admin"])


@admin.get("/health", response_model=m.Health, response_model_exclude_unset=True)
async def health(service: ServiceDep) -> Any:
    return await call(service.health)


@admin.get("/version", response_model=m.Version, response_model_exclude_unset=True)
async def version_route() -> Any:
    return {"version": version()}


@admin.post("/ingest", status_code=202, response_model=m.JobState, response_model_exclude_unset=True)
async def ingest_route(
    service: ServiceDep,
    roots: Annotated[tuple[Path, ...], Depends(_roots)],
    paths: Annotated[list[str], Body(embed=True)],
) -> Any:
    job = await call(service.ingest, allowed_ingest_paths(paths, roots))
    return job.as_dict()


@admin.get("/jobs", response_model=list[m.JobState], response_model_exclude_unset=True)
async def jobs_route(service: ServiceDep) -> Any:
    return service.jobs()


@admin.get("/jobs/{job_id}", response_model=m.JobState, response_model_exclude_unset=True)
async def job_route(service: ServiceDep, job_id: str) -> Any:
    return service.job(job_id)


@admin.get(
    "/jobs/{job_id}/events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "the job's state (JobState) as it changes"}
    },
)
async def job_events(service: ServiceDep, job_id: str) -> Any:
    service.job(job_id)  # 404 before the stream starts

    async def events() -> AsyncIterator[str]:
        last = None
        while True:
            state = service.job(job_id)
            if state != last:
                yield f"data: {json.dumps(state)}\n\n"
                last = state
            if state["finished"] is not None:
                return
            await asyncio.sleep(EVENT_INTERVAL_S)

    return StreamingResponse(events(), media_type="text/event-stream")


ROUTERS = (books, search, kiwix, admin)
