# Purchaser
An agent that prepares a purchase and asks a human before spending money.

## Main
### Triggers
- At the beginning
### Steps
- Ask the user what to buy
- Ask for approval of the purchase
- Ask a human to review the order, escalate if it was not approved
- Tell the user what happened and end
