"""Retail agent tools. Only the agent acts on the world (single control)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from flatscore.domains.framework import NotFound, Precondition, ToolError, Toolkit, lookup, tool
from flatscore.domains.retail.models import CancelReason, Order, Product, RetailDB, User


def _order_view(order: Order) -> dict[str, Any]:
    return order.model_dump(mode="json", exclude_defaults=True)


class RetailTools(Toolkit[RetailDB]):
    """The retail agent's tools."""

    def _order(self, order_id: str) -> Order:
        return lookup(self.db.orders, "Order", order_id)

    def _user_view(self, user: User) -> dict[str, Any]:
        # Short on purpose: every result is read by a small model.
        name = f"{user.first_name} {user.last_name}"
        return {"user_id": user.user_id, "name": name, "order_ids": user.order_ids}

    @tool("read")
    def find_user_by_email(self, email: str) -> dict[str, Any]:
        """Find a user by email. Returns the user with their order ids."""
        for user in self.db.users.values():
            if user.email.lower() == email.strip().lower():
                return self._user_view(user)
        raise NotFound("User with email", email)

    @tool("read")
    def find_user_by_name_zip(self, first_name: str, last_name: str, zip: str) -> dict[str, Any]:
        """Find a user by first name, last name and zip code."""
        for user in self.db.users.values():
            if (
                user.first_name.lower() == first_name.strip().lower()
                and user.last_name.lower() == last_name.strip().lower()
                and user.zip == zip.strip()
            ):
                return self._user_view(user)
        raise NotFound("User", f"{first_name} {last_name}, {zip}")

    @tool("read")
    def get_order(self, order_id: str) -> dict[str, Any]:
        """Get an order's status, address and items."""
        return _order_view(self._order(order_id))

    @tool("read")
    def get_product(self, product_id: str) -> Product:
        """Get a product's variants (item ids, options, price, availability)."""
        return lookup(self.db.products, "Product", product_id)

    @tool("write")
    def cancel_order(self, order_id: str, reason: CancelReason) -> dict[str, Any]:
        """Cancel a pending order. The refund goes to the original payment method."""
        order = self._order(order_id)
        if order.status != "pending":
            raise Precondition(
                f"Order '{order_id}' is {order.status}: only pending orders can be cancelled."
            )
        order.status = "cancelled"
        order.cancel_reason = reason
        order.refund = round(sum(item.price for item in order.items), 2)
        return _order_view(order)

    @tool("write")
    def change_address(
        self, order_id: str, address: Annotated[str, Field(min_length=5)]
    ) -> dict[str, Any]:
        """Change the shipping address of a pending order."""
        order = self._order(order_id)
        if order.status != "pending":
            raise Precondition(
                f"Order '{order_id}' is {order.status}: only pending orders can change address."
            )
        order.address = address
        return _order_view(order)

    def _delivered_items(self, order: Order, item_ids: list[str]) -> None:
        if order.status != "delivered":
            raise Precondition(
                f"Order '{order.order_id}' is {order.status}: "
                "only delivered orders can be returned or exchanged."
            )
        known = {item.item_id for item in order.items}
        for item_id in item_ids:
            if item_id not in known:
                raise ToolError(
                    f"Item '{item_id}' not found in order '{order.order_id}'.", "entity_not_found"
                )
        if len(set(item_ids)) != len(item_ids):
            raise Precondition("Each item can be returned or exchanged only once.")

    @tool("write")
    def return_items(
        self, order_id: str, item_ids: Annotated[list[str], Field(min_length=1)]
    ) -> dict[str, Any]:
        """Return items of a delivered order for a refund."""
        order = self._order(order_id)
        self._delivered_items(order, item_ids)
        order.status = "return requested"
        order.returned_item_ids = list(item_ids)
        prices = {item.item_id: item.price for item in order.items}
        order.refund = round(sum(prices[i] for i in item_ids), 2)
        return _order_view(order)

    @tool("write")
    def exchange_items(
        self,
        order_id: str,
        item_ids: Annotated[list[str], Field(min_length=1)],
        new_item_ids: Annotated[list[str], Field(min_length=1)],
    ) -> dict[str, Any]:
        """Exchange items of a delivered order for other variants of the same products.

        Args:
            new_item_ids: one new item id per item id, in the same order
        """
        if len(item_ids) != len(new_item_ids):
            raise ToolError(
                "exchange_items() arguments 'item_ids' and 'new_item_ids' differ in length.",
                "bad_arguments",
            )
        order = self._order(order_id)
        self._delivered_items(order, item_ids)
        by_id = {item.item_id: item for item in order.items}
        for old_id, new_id in zip(item_ids, new_item_ids, strict=True):
            product = self.db.products[by_id[old_id].product_id]
            variants = {v.item_id: v for v in product.variants}
            if new_id not in variants:
                if any(
                    new_id in {v.item_id for v in p.variants} for p in self.db.products.values()
                ):
                    raise Precondition(
                        f"Item '{new_id}' is not a variant of {product.name}: "
                        "an exchange must be for the same product."
                    )
                raise NotFound("Item", new_id)
            if new_id == old_id:
                raise Precondition(f"Item '{new_id}' is the same item: nothing to exchange.")
            if not variants[new_id].available:
                raise Precondition(f"Item '{new_id}' is not available.")
        order.status = "exchange requested"
        order.exchange = dict(zip(item_ids, new_item_ids, strict=True))
        return _order_view(order)
