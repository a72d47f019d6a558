"""Tenants at the store: a task is stored under its caller's principal within a tenant
(`records.tenant_owner`), so the owner filters and dedupe keys a store keeps keep each tenant
apart — the same principal and messageId in two tenants are two owners and two tasks, and a
task stored before tenants (its owner the bare principal) is the default tenant's; a
listing of every owner within one tenant (an operator's, `TaskQuery.tenant`) holds that
tenant's tasks alone; a principal's push configs count against its cap in every tenant at
once."""

from __future__ import annotations

from a2a_handoff.protocol.states import TaskState
from a2a_handoff.stores.base import TaskQuery, TaskStore
from a2a_handoff.stores.conformance.push_suite import config
from a2a_handoff.stores.conformance.samples import Suite, advance, create, declared, stored
from a2a_handoff.stores.records import tenant_owner

TENANTS = ("", "acme", "globex")


class TenantSuite(Suite):
    """Owners of one principal in several tenants, for every store."""

    async def test_each_tenant_lists_only_its_own_tasks(self, store: TaskStore) -> None:
        made = {t: await create(store, tenant_owner(t, "alice"), "c1") for t in TENANTS}
        await advance(store, made["acme"], TaskState.WORKING, TaskState.COMPLETED)
        for tenant in TENANTS:
            owner = tenant_owner(tenant, "alice")
            page = await store.list_tasks(TaskQuery(owner=owner))
            assert [r.id for r in page.records] == [made[tenant].id]
            assert page.total_size == 1
            in_c1 = await store.list_tasks(TaskQuery(owner=owner, context_id="c1"))
            assert [r.id for r in in_c1.records] == [made[tenant].id]
            assert (await stored(store, made[tenant].id)).owner == owner
        done = TaskQuery(owner=tenant_owner("globex", "alice"), state=TaskState.COMPLETED)
        assert (await store.list_tasks(done)).records == []
        assert (await store.list_tasks(TaskQuery(owner=None))).total_size == len(TENANTS)

    async def test_every_owners_tasks_within_a_tenant_are_that_tenants_alone(
        self, store: TaskStore
    ) -> None:
        principals = ("alice", "bob", "\x1facme\x1fbob", "\x1f", "a_b")
        made: dict[str, set[str]] = {t: set() for t in (*TENANTS, "acm", "acme_", "a")}
        for tenant in made:
            for principal in principals:
                made[tenant].add((await create(store, tenant_owner(tenant, principal), "c1")).id)
        for tenant, ids in made.items():
            page = await store.list_tasks(TaskQuery(owner=None, tenant=tenant, page_size=100))
            assert {r.id for r in page.records} == ids, tenant
            assert page.total_size == len(principals)
            scoped = TaskQuery(owner=None, tenant=tenant, context_id="c1", page_size=2)
            first = await store.list_tasks(scoped)
            assert first.total_size == len(principals)
            rest = await store.list_tasks(
                TaskQuery(
                    owner=None, tenant=tenant, context_id="c1", page_token=first.next_page_token
                )
            )
            assert {r.id for r in (*first.records, *rest.records)} == ids
        assert (await store.list_tasks(TaskQuery(owner=None, tenant="nobody"))).total_size == 0
        every = await store.list_tasks(TaskQuery(owner=None, page_size=100))
        assert every.total_size == len(principals) * len(made)

    async def test_the_empty_principal_lists_its_own_tasks_alone(self, store: TaskStore) -> None:
        # Without authentication every caller is the principal "": its listing in a tenant
        # holds that tenant's tasks of "", not every task that shares itself with nobody.
        made = {t: await create(store, tenant_owner(t, ""), "c1") for t in TENANTS}
        await create(store, "alice", "c1")
        for tenant in TENANTS:
            page = await store.list_tasks(TaskQuery(owner=tenant_owner(tenant, "")))
            assert [r.id for r in page.records] == [made[tenant].id]
            assert page.total_size == 1

    async def test_a_task_stored_under_the_bare_principal_is_the_default_tenants(
        self, store: TaskStore
    ) -> None:
        before = await create(store, "alice")  # as every task was stored before tenants
        default = await store.list_tasks(TaskQuery(owner=tenant_owner("", "alice")))
        assert [r.id for r in default.records] == [before.id]
        named = await store.list_tasks(TaskQuery(owner=tenant_owner("acme", "alice")))
        assert named.records == []

    async def test_one_message_id_in_each_tenant_is_a_task_each(self, store: TaskStore) -> None:
        made = {}
        for tenant in TENANTS:
            owner = tenant_owner(tenant, "alice")
            key = "\x1f".join((owner, "", "message-1"))  # the runtime's dedupe key
            made[tenant] = await create(store, owner, key=key)
        for tenant in TENANTS:
            key = "\x1f".join((tenant_owner(tenant, "alice"), "", "message-1"))
            assert await store.find(key) == made[tenant].id
        assert len({record.id for record in made.values()}) == len(TENANTS)

    async def test_a_principal_shaped_like_a_tenants_owner_is_kept_apart(
        self, store: TaskStore
    ) -> None:
        tenants = await create(store, tenant_owner("acme", "alice"))
        crafted = await create(store, tenant_owner("", "\x1facme\x1falice"))
        for owner, record in (
            (tenant_owner("acme", "alice"), tenants),
            (tenant_owner("", "\x1facme\x1falice"), crafted),
        ):
            page = await store.list_tasks(TaskQuery(owner=owner))
            assert [r.id for r in page.records] == [record.id]

    async def test_a_principals_active_push_configs_count_in_every_tenant(
        self, store: TaskStore
    ) -> None:
        push = declared(store.capabilities.push, "push configs")
        owners = [tenant_owner(t, p) for t in TENANTS for p in ("alice", "\x1fx", "alice2")]
        for owner in owners:
            record = await create(store, owner)
            await push.put_push_config(config(record.id, "c1"))
        for principal in ("alice", "\x1fx", "alice2"):
            assert await push.active_push_count(principal) == len(TENANTS)
        assert await push.active_push_count("acme") == 0
        assert await push.active_push_count("x") == 0
