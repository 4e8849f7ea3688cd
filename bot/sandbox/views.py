"""views.* methods: modals (open, push, update) and App Home (publish)."""

from __future__ import annotations

from typing import Any

from bot.sandbox.errors import ApiError
from bot.sandbox.limits import validate_view
from bot.sandbox.state import TS_BASE, Workspace


class ViewMethods(Workspace):
    def _take_trigger(self, args: dict[str, Any]) -> None:
        trigger_id = self._require(args, "trigger_id")
        if trigger_id in self._used_triggers:
            raise ApiError("exchanged_trigger_id")
        self._used_triggers.add(trigger_id)

    def store_view(
        self, normalized: dict[str, Any], *, view_id: str | None = None, root_view_id: str | None = None,
        previous_view_id: str | None = None,
    ) -> dict[str, Any]:
        self._view_counter += 1
        view_id = view_id or f"V{self._view_counter:08d}"
        view = {
            "id": view_id,
            "team_id": self.team_id,
            "type": normalized.get("type"),
            "blocks": normalized.get("blocks", []),
            "private_metadata": normalized.get("private_metadata", ""),
            "callback_id": normalized.get("callback_id", ""),
            "external_id": normalized.get("external_id", ""),
            "state": {"values": {}},
            "hash": f"{TS_BASE}.h{self._view_counter:08d}",
            "clear_on_close": bool(normalized.get("clear_on_close", False)),
            "notify_on_close": bool(normalized.get("notify_on_close", False)),
            "root_view_id": root_view_id or view_id,
            "previous_view_id": previous_view_id,
            "app_id": self.app_id,
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }
        for key in ("title", "submit", "close"):
            if key in normalized:
                view[key] = normalized[key]
        self.views[view_id] = view
        return view

    def _check_external_id(self, normalized: dict[str, Any], *, except_id: str | None = None) -> None:
        external_id = normalized.get("external_id")
        if external_id and any(
            v.get("external_id") == external_id and v["id"] != except_id for v in self.views.values()
        ):
            raise ApiError("duplicate_external_id")

    def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "trigger_id")
        normalized = validate_view(args.get("view"))
        self._check_external_id(normalized)
        self._take_trigger(args)
        return {"view": self.store_view(normalized)}

    def _views_push(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "trigger_id")
        normalized = validate_view(args.get("view"))
        self._check_external_id(normalized)
        self._take_trigger(args)
        return {"view": self.store_view(normalized)}

    def _views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        current: dict[str, Any] | None = None
        if args.get("view_id"):
            current = self.views.get(str(args["view_id"]))
        elif args.get("external_id"):
            current = next((v for v in self.views.values() if v["external_id"] == args["external_id"]), None)
        else:
            raise ApiError("invalid_arguments", ["[ERROR] view_id or external_id is required"])
        if current is None:
            raise ApiError("not_found")
        normalized = validate_view(args.get("view"))
        if args.get("hash") and args["hash"] != current["hash"]:
            raise ApiError("hash_conflict")
        self._check_external_id(normalized, except_id=current["id"])
        if "external_id" not in normalized and current["external_id"]:
            normalized["external_id"] = current["external_id"]
        view = self.store_view(
            normalized, view_id=current["id"], root_view_id=current["root_view_id"],
            previous_view_id=current["previous_view_id"],
        )
        for user_id, home in list(self.home_views.items()):
            if home["id"] == view["id"]:
                self.home_views[user_id] = view
        return {"view": view}

    def _views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        user_id = self._require(args, "user_id")
        normalized = validate_view(args.get("view"))
        if normalized.get("type") != "home":
            raise ApiError("invalid_arguments", ["[ERROR] views.publish requires a home view [json-pointer:/view/type]"])
        current = self.home_views.get(user_id)
        if current is not None and args.get("hash") and args["hash"] != current["hash"]:
            raise ApiError("hash_conflict")
        view = self.store_view(normalized, view_id=current["id"] if current else None)
        self.home_views[user_id] = view
        return {"view": view}
