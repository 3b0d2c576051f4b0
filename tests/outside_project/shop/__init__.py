"""The outside project's app: an order is placed, a receipt is sent, a card is charged."""
