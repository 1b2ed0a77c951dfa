# Planner
An agent that plans a trip by delegating to nested playbooks, two levels deep.

## Main
### Triggers
- At the beginning
### Steps
- Ask PlanTrip for a plan for Lisbon and tell the user
- End

## PlanTrip($city)
Plans a trip by asking PickDays and then listing sights.
### Steps
- Call PickDays to choose how many days
- Return a plan string

## PickDays($city)
Chooses a number of days.
### Steps
- Return a number of days
