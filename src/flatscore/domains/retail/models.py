"""The retail database: users, products (with variants) and orders."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from flatscore.strict import StrictModel

OrderStatus = Literal[
    "pending", "processed", "delivered", "cancelled", "return requested", "exchange requested"
]
CancelReason = Literal["no longer needed", "ordered by mistake"]


class Variant(StrictModel):
    item_id: str
    options: dict[str, str]
    price: float
    available: bool = True


class Product(StrictModel):
    product_id: str
    name: str
    variants: list[Variant]


class OrderItem(StrictModel):
    item_id: str
    product_id: str
    name: str
    options: dict[str, str]
    price: float


class Order(StrictModel):
    order_id: str
    user_id: str
    status: OrderStatus
    address: str
    items: list[OrderItem]
    cancel_reason: CancelReason | None = None
    returned_item_ids: list[str] = Field(default_factory=list)
    exchange: dict[str, str] = Field(default_factory=dict)
    refund: float = 0.0


class User(StrictModel):
    user_id: str
    first_name: str
    last_name: str
    email: str
    zip: str
    address: str
    order_ids: list[str]


class RetailDB(StrictModel):
    users: dict[str, User]
    products: dict[str, Product]
    orders: dict[str, Order]
