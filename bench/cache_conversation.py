"""The recorded DM `bench.cache_replay` plays: 30 turns of a Telegram chat with its owner.

Plain messages, tool turns (memory, files, a reminder, an edit of MEMORY.md), a long pasted
message, a photo, and a long document written to a file; compaction runs after turn 20
(`COMPACT_AFTER`). Each turn is what the user sent and what the model answered, call by
call, so the replay sends Perch's real requests for them; tool ids are fixed so every run
sends the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

COMPACT_AFTER = 20

# One model response: ("text", reply) or ("tools", [(name, input), ...]).
Step = tuple[str, Any]


@dataclass(frozen=True, slots=True)
class Exchange:
    user: str
    steps: list[Step]
    photo: bool = False
    tags: tuple[str, ...] = field(default=())


def _say(text: str) -> Step:
    return ("text", text)


def _call(*calls: tuple[str, dict[str, Any]]) -> Step:
    return ("tools", list(calls))


PASTED = (
    "Here is the email from the venue, can you pull out what I have to do and by when?\n\n"
    + "\n\n".join(
        f"Section {n}. The booking for the Harbour Room on the evening of Friday 12 June "
        "includes exclusive use from 18:00 to 23:30, set-up access from 16:00, a standard "
        "sound system and two wireless microphones. A deposit of 30% is due within 14 days "
        "of this confirmation; the balance is due 21 days before the event. Final guest "
        "numbers must be confirmed 10 days before, and dietary requirements 7 days before. "
        "Cancellation more than 60 days ahead refunds the deposit minus a 10% fee; later "
        "cancellations forfeit it. Decorations may not be fixed to walls; candles must be in "
        "enclosed holders. Music must stop at 23:00 in line with the licence."
        for n in range(1, 11)
    )
)

_PLACES = (
    "Alfama|Baixa|Belém|Chiado|Príncipe Real|Cascais|Sintra|LX Factory|Graça|Parque das "
    "Nações|Estrela|Campo de Ourique|Mouraria|Santos|Alcântara|Ajuda|Avenidas Novas|Marvila|"
    "Benfica|Lumiar|Oeiras|Almada|Sesimbra|Setúbal|Ericeira"
)
TRIP_PLAN = "# Lisbon trip plan\n\n" + "\n".join(
    f"## Day {d}\n- Morning: walk {place}, coffee at a kiosk, photos from the viewpoint.\n"
    f"- Lunch: grilled fish near the river; book ahead on weekends.\n"
    f"- Afternoon: museum or tram ride; keep two hours free for wandering.\n"
    f"- Evening: dinner around 20:30, fado if tickets are left; taxi back after 23:00.\n"
    for d, place in enumerate(_PLACES.split("|"), start=1)
)

_ANSWER = (
    "Sure. {what} If you want, I can also keep a note of it so it comes back when it matters; "
    "just say the word. Anything else for today?"
)


def _answer(what: str) -> Step:
    return _say(_ANSWER.format(what=what))


CONVERSATION: list[Exchange] = [
    Exchange(
        "Hi! I'm Ada. I just set you up on my server.",
        [
            _say(
                "Hi Ada, nice to meet you. I'm Perch, your assistant here on Telegram. I can keep "
                "notes, read and write files in my workspace, set reminders and look things up. "
                "What would you like to start with?"
            )
        ],
    ),
    Exchange(
        "Please remember that my sister Ana's birthday is on 12 May.",
        [
            _call(("memory_append", {"text": "Ana (Ada's sister) has her birthday on 12 May."})),
            _say("Noted: Ana's birthday is on 12 May. I'll remember it."),
        ],
    ),
    Exchange(
        "What do you know about me so far?",
        [
            _call(("memory_search", {"query": "Ada"})),
            _answer(
                "So far I know your name is Ada and that your sister Ana's birthday is 12 May."
            ),
        ],
    ),
    Exchange(
        "Can you remind me tomorrow at 9 to call the plumber?",
        [
            _call(
                (
                    "cron",
                    {
                        "action": "add",
                        "name": "plumber",
                        "at": "2027-03-01T09:00",
                        "message": "Remind Ada to call the plumber.",
                    },
                )
            ),
            _say("Done: tomorrow at 09:00 (UTC) I'll remind you to call the plumber."),
        ],
    ),
    Exchange("thanks!", [_say("You're welcome, Ada.")]),
    Exchange(
        PASTED,
        [
            _say(
                "Here's what the venue needs from you, in order:\n"
                "1. Pay the 30% deposit within 14 days of the confirmation.\n"
                "2. Pay the balance 21 days before 12 June (by 22 May).\n"
                "3. Confirm final guest numbers 10 days before (by 2 June).\n"
                "4. Send dietary requirements 7 days before (by 5 June).\n"
                "Also good to know: set-up from 16:00, music stops at 23:00, nothing fixed to walls, "
                "candles only in enclosed holders. Cancelling more than 60 days ahead refunds the "
                "deposit minus 10%."
            )
        ],
        tags=("long message",),
    ),
    Exchange(
        "Put those deadlines in my calendar notes file please.",
        [
            _call(
                (
                    "write_file",
                    {
                        "path": "notes/party-deadlines.md",
                        "content": "# Party at the Harbour Room, Fri 12 June\n- Deposit (30%): within 14 "
                        "days of confirmation\n- Balance: by 22 May\n- Guest numbers: by 2 June\n- "
                        "Dietary requirements: by 5 June\n",
                    },
                )
            ),
            _say("Saved to notes/party-deadlines.md."),
        ],
    ),
    Exchange(
        "How many guests did I say I'd invite?",
        [
            _call(("memory_search", {"query": "guests"})),
            _say("I don't have a guest count noted yet. How many are you planning for?"),
        ],
    ),
    Exchange(
        "About 40. Note that.",
        [
            _call(("memory_append", {"text": "Ada's party at the Harbour Room: about 40 guests."})),
            _say("Noted: about 40 guests."),
        ],
    ),
    Exchange(
        "Look at this, what kind of bird is it?",
        [
            _say(
                "That's a grey heron: the long neck folded into an S, the dagger bill and the black "
                "stripe above the eye give it away. They stand still in shallow water for ages before "
                "striking at fish."
            )
        ],
        photo=True,
        tags=("photo",),
    ),
    Exchange(
        "Are they common around here?",
        [
            _say(
                "Very: grey herons live along rivers, lakes and even city canals across most of "
                "Europe. You'll often see them in parks, and they nest in colonies high in trees."
            )
        ],
    ),
    Exchange(
        "Cool. What's on my list of notes files?",
        [
            _call(("list_dir", {"path": "notes"})),
            _say("There's one file so far: notes/party-deadlines.md."),
        ],
    ),
    Exchange(
        "I'm planning a trip to Lisbon in spring. Draft me a day-by-day plan and save it.",
        [
            _call(("write_file", {"path": "notes/lisbon.md", "content": TRIP_PLAN})),
            _say(
                "I've written a 25-day plan to notes/lisbon.md: a neighbourhood a day, with "
                "lunch by the river and evenings free for fado. Shall I trim it to a week?"
            ),
        ],
        tags=("long tool input",),
    ),
    Exchange(
        "Yes, trim it to a week, the first seven days.",
        [
            _call(("read_file", {"path": "notes/lisbon.md", "limit": 40})),
            _call(("write_file", {"path": "notes/lisbon-week.md", "content": TRIP_PLAN[:2200]})),
            _say("Done: notes/lisbon-week.md has the first seven days."),
        ],
    ),
    Exchange(
        "Great. Also remember that I prefer aisle seats on flights.",
        [
            _call(("memory_append", {"text": "Ada prefers aisle seats on flights."})),
            _say("Noted: aisle seats."),
        ],
    ),
    Exchange(
        "Can you put the important things about me in your long-term memory file?",
        [
            _call(
                (
                    "write_file",
                    {
                        "path": "MEMORY.md",
                        "content": "# Long-term memory\n\n- Owner: Ada.\n- Sister Ana, birthday 12 May.\n"
                        "- Party at the Harbour Room, Fri 12 June, about 40 guests.\n"
                        "- Prefers aisle seats on flights.\n",
                    },
                )
            ),
            _say("Done: MEMORY.md now holds your name, Ana's birthday, the party and your seats."),
        ],
        tags=("memory edit",),
    ),
    Exchange(
        "What's the weather usually like in Lisbon in April?",
        [
            _say(
                "Mild and mostly sunny: days around 19-21 °C, nights near 12 °C, with a few showers. "
                "Bring a light jacket for the evenings by the river."
            )
        ],
    ),
    Exchange(
        "And in May?",
        [
            _say(
                "Warmer and drier: about 22-24 °C in the day, 14 °C at night, rain is rare. May is "
                "one of the nicest months to go."
            )
        ],
    ),
    Exchange(
        "Let's go in May then. Note it.",
        [
            _call(("memory_append", {"text": "Ada's Lisbon trip: planned for May."})),
            _say("Noted: Lisbon in May."),
        ],
    ),
    Exchange(
        "What did I tell you about my sister?",
        [
            _say(
                "Your sister is Ana, and her birthday is on 12 May: it falls during the trip, so you "
                "may want to plan something in Lisbon or call her from there."
            )
        ],
    ),
    Exchange(
        "Good point. Remind me on 10 May to buy her a present.",
        [
            _call(
                (
                    "cron",
                    {
                        "action": "add",
                        "name": "present for Ana",
                        "at": "2027-05-10T10:00",
                        "message": "Remind Ada to buy a birthday present for Ana (12 May).",
                    },
                )
            ),
            _say("Set: on 10 May at 10:00 I'll remind you to buy Ana's present."),
        ],
    ),
    Exchange(
        "What reminders do I have?",
        [
            _call(("cron", {"action": "list"})),
            _say("Two: tomorrow 09:00 call the plumber, and 10 May 10:00 Ana's present."),
        ],
    ),
    Exchange(
        "Thanks. How long is the flight from Berlin to Lisbon?",
        [
            _say(
                "About 3 h 40 min direct. Several airlines fly it daily; morning flights land early "
                "enough for a first walk in Alfama."
            )
        ],
    ),
    Exchange(
        "Ok. Anything I should book early?",
        [
            _answer(
                "Book fado tickets, the Sintra palaces and a table at popular seafood places early; "
                "May weekends fill up."
            )
        ],
    ),
    Exchange(
        "Please add those to the week plan file.",
        [
            _call(("read_file", {"path": "notes/lisbon-week.md"})),
            _call(
                (
                    "edit_file",
                    {
                        "path": "notes/lisbon-week.md",
                        "old_text": "# Lisbon trip plan",
                        "new_text": "# Lisbon trip plan\n\nBook early: fado, Sintra palaces, seafood.",
                    },
                )
            ),
            _say("Added a 'book early' line at the top of notes/lisbon-week.md."),
        ],
    ),
    Exchange("Perfect.", [_say("Glad it helps.")]),
    Exchange(
        "Do you remember where the party is?",
        [_say("At the Harbour Room, on Friday 12 June, from 18:00; about 40 guests.")],
    ),
    Exchange(
        "And when do I have to pay the balance?",
        [
            _say(
                "By 22 May, 21 days before the party. That's during your Lisbon trip, so you may want "
                "to pay it before you leave."
            )
        ],
    ),
    Exchange(
        "Right, remind me on 15 May to pay it.",
        [
            _call(
                (
                    "cron",
                    {
                        "action": "add",
                        "name": "venue balance",
                        "at": "2027-05-15T09:00",
                        "message": "Remind Ada to pay the Harbour Room balance (due 22 May).",
                    },
                )
            ),
            _say("Set for 15 May at 09:00."),
        ],
    ),
    Exchange("That's all for now, thanks!", [_say("Anytime, Ada. Enjoy your evening.")]),
]

SUMMARY = (
    "- The user is Ada; her sister Ana's birthday is 12 May.\n"
    "- Party at the Harbour Room, Fri 12 June, ~40 guests; deadlines saved in "
    "notes/party-deadlines.md (deposit 30% within 14 days, balance by 22 May, numbers by "
    "2 June, dietary by 5 June).\n"
    "- Reminder set: tomorrow 09:00 call the plumber.\n"
    "- Lisbon trip planned for May: notes/lisbon.md (25 days), notes/lisbon-week.md (7 days).\n"
    "- Prefers aisle seats. MEMORY.md holds the key facts.\n"
    "- Shown a photo of a grey heron; talked about herons in Europe."
)
COMPACTION: list[Step] = [
    _call(("memory_append", {"text": "Ada: Lisbon trip in May; party 12 June."})),
    _say("NO_REPLY"),
    _say(SUMMARY),
]
