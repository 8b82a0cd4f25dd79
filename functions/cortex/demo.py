"""The Top Cup demo data set: a coffee-cup and packaging supplier and its team of agents.

`load_demo` creates the tenant (Europe/Berlin) with agents luna (customer support), mia (account
management), anna (sales outreach), jasper (sales closer) and the read-only monitor helios, about
fifty contacts at cafés, roasters, hotels and offices spread over all seven stages, and a few
hundred interactions: outreach sequences, quotes, orders, tickets opened and resolved, refunds,
escalations and churn. Everything is generated from `random.Random(42)`, so every run builds the
same data, and it all goes through the functions agents use (`upsert_contact`, `log_interaction`,
summarised at write time). A few interactions are logged without a summary so the worker has
something to do, and every contact's context is queued for the worker.

Every agent also gets a corner of the memory graph (`build_memories`), written through `remember`
as the agent itself (helios, read-only, through the system agent): preferences and capabilities
that apply to it, recent decisions and events, patterns with their observations, goals, a
contradiction and a low-confidence fact, so that every section of every agent's briefing has
content. Luna's briefings are pre-computed.

The interaction log is append-only and stamps its own times, so the story's dates are kept in
each interaction's metadata as `occurred_at`.
"""

from __future__ import annotations

import json
import os
import random
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from cortex import db
from cortex.config import get_settings
from cortex.contacts import service as contacts
from cortex.migrate import ROOT

TENANT_NAME = "Top Cup"
TENANT_SLUG = "top-cup"
TIME_ZONE = "Europe/Berlin"
DEMO_VERSION = 1
# Dev only (git-ignored): keys are stored hashed, so the demo keeps its agents' keys here.
DEFAULT_KEYS_FILE = ROOT / ".cortex-demo-keys.json"
# (name, display name, role, read-only, max input tokens, daily token budget)
AGENTS: tuple[tuple[str, str, str, bool, int, int], ...] = (
    ("luna", "Luna (customer support)", "agent", False, 2000, 100_000),
    ("mia", "Mia (account management)", "agent", False, 2000, 100_000),
    ("anna", "Anna (sales outreach)", "agent", False, 1500, 80_000),
    ("jasper", "Jasper (sales closer)", "agent", False, 2500, 80_000),
    ("helios", "Helios (monitor)", "monitor", True, 4000, 50_000),
)
# Agents whose briefings the scheduled job keeps rendered (seed 001: the ones that boot most often).
PRECOMPUTE = ("luna",)
_LOCK = 7267100  # advisory lock: two demo loads at once would race on the tenant


@dataclass
class DemoInfo:
    """What `load_demo` left in the database: the tenant, its agents' keys and the data counts."""

    tenant_id: str
    keys: dict[str, str]
    contacts: int
    interactions: int
    loaded: bool = False  # False when the tenant already held the demo and nothing was written
    queued_jobs: int = 0


def use_database(database_url: str) -> None:
    """Points this process's settings (and so the service modules' pool) at `database_url`."""
    if os.environ.get("DATABASE_URL") == database_url and get_settings().database_url == database_url:
        return
    os.environ["DATABASE_URL"] = database_url
    get_settings.cache_clear()
    db.close_pool()


# --- the data --------------------------------------------------------------------------------------
# fmt: off

# (first name, last name, company, email domain, city, segment)
_PEOPLE: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("Lena", "Hoffmann", "Kaffeehaus Morgenrot", "morgenrot-kaffee.de", "Berlin", "cafe"),
    ("Jonas", "Petersen", "Nordbrew Roasters", "nordbrew.de", "Hamburg", "roaster"),
    ("Sanne", "de Vries", "Bean & Leaf Collective", "beanandleaf.nl", "Amsterdam", "cafe"),
    ("Maximilian", "Bauer", "Café Lindenblatt", "lindenblatt-cafe.de", "Munich", "cafe"),
    ("Katrin", "Vogel", "Rösterei Elbufer", "elbufer-roesterei.de", "Dresden", "roaster"),
    ("Oliver", "Hughes", "The Daily Grind Co.", "dailygrind.co.uk", "London", "cafe"),
    ("Stefan", "Krüger", "Espresso Express", "espresso-express.de", "Frankfurt", "kiosk"),
    ("Miriam", "Schulz", "Bäckerei Sonnenkorn", "sonnenkorn.de", "Cologne", "bakery"),
    ("Tobias", "Wieser", "Hotel Alpenblick Group", "alpenblick-hotels.at", "Innsbruck", "hotel"),
    ("Aylin", "Demir", "WorkHub Coworking", "workhub.berlin", "Berlin", "office"),
    ("Felix", "Lehmann", "Campus Catering Leipzig", "campus-catering-leipzig.de", "Leipzig", "education"),
    ("Eva", "Gruber", "FreshFuel Juice Bars", "freshfuel.at", "Vienna", "cafe"),
    ("Hannah", "Brandt", "Green Mile Events", "greenmile-events.de", "Hamburg", "events"),
    ("Markus", "Richter", "Stadtwerk Kantine", "stadtwerk-kantine.de", "Hanover", "catering"),
    ("Freja", "Nielsen", "Copenhagen Coffee Lab", "cphcoffeelab.dk", "Copenhagen", "roaster"),
    ("Julian", "Maier", "Brühwerk Kaffeebar", "bruehwerk.de", "Stuttgart", "cafe"),
    ("Nina", "Keller", "Milchbar Zürich", "milchbar.ch", "Zurich", "cafe"),
    ("Paul", "Schmitt", "Urban Oats Café", "urbanoats.de", "Berlin", "cafe"),
    ("Clara", "Wolf", "Tasse & Teller", "tasseundteller.de", "Düsseldorf", "cafe"),
    ("Daniel", "Koch", "Rheinblick Hotels", "rheinblick-hotels.de", "Koblenz", "hotel"),
    ("Bram", "Jansen", "Pioneer Roasting Co.", "pioneerroasting.nl", "Rotterdam", "roaster"),
    ("Sophie", "Meyer", "Kaffeekontor Bremen", "kaffeekontor-bremen.de", "Bremen", "roaster"),
    ("Lukas", "Schneider", "Café Bohne Bio", "bohne-bio.de", "Freiburg", "cafe"),
    ("Tim", "Wagner", "Quick Sip Kiosks", "quicksip.de", "Frankfurt", "kiosk"),
    ("Anja", "Becker", "Studierendenwerk Heidelberg", "stw-heidelberg.de", "Heidelberg", "education"),
    ("Ralf", "Neumann", "Airport Lounge Services", "lounge-services.de", "Frankfurt", "catering"),
    ("Kim", "Hartmann", "FitBar Studios", "fitbar-studios.de", "Munich", "leisure"),
    ("Greta", "Weiss", "Konditorei Weiss", "konditorei-weiss.de", "Munich", "bakery"),
    ("Mehmet", "Yilmaz", "Tea Tribe", "teatribe.de", "Berlin", "cafe"),
    ("Ingrid", "Larsen", "Lakeside Conference Center", "lakeside-conference.no", "Oslo", "events"),
    ("Camille", "Dubois", "Cinéma Lumière", "cinema-lumiere.fr", "Strasbourg", "leisure"),
    ("Theresa", "Huber", "Crema Collective", "cremacollective.at", "Vienna", "cafe"),
    ("Matthias", "Frank", "Weingut Südhang", "suedhang-wein.de", "Würzburg", "events"),
    ("Laura", "Zimmermann", "Gabel & Co. Bistros", "gabelundco.de", "Nuremberg", "catering"),
    ("Erik", "Lund", "Backstube Nord", "backstube-nord.de", "Kiel", "bakery"),
    ("Mara", "König", "Kaffeebus Festival Coffee", "kaffeebus.de", "Leipzig", "events"),
    ("Andreas", "Schäfer", "TechCorp Office Services", "techcorp-office.de", "Munich", "office"),
    ("Johanna", "Krause", "Museumscafé Insel", "museumscafe-insel.de", "Berlin", "cafe"),
    ("Simon", "Lang", "Bahnhofsbäckerei Krume", "krume-baeckerei.de", "Hanover", "bakery"),
    ("Leonie", "Fischer", "Campus Coffee Aachen", "campuscoffee-aachen.de", "Aachen", "education"),
    ("Nils", "Hansen", "Hafenrösterei Kiel", "hafenroesterei.de", "Kiel", "roaster"),
    ("Inês", "Costa", "Zoe's Smoothies", "zoessmoothies.pt", "Lisbon", "cafe"),
    ("Verena", "Roth", "Biomarkt Grünzeug", "gruenzeug-bio.de", "Karlsruhe", "retail"),
    ("Dennis", "Berger", "Arena Catering Dortmund", "arena-catering.de", "Dortmund", "events"),
    ("Petra", "Winkler", "Mokka Mobil Vending", "mokkamobil.de", "Essen", "office"),
    ("Ola", "Berg", "Polar Café", "polarcafe.no", "Oslo", "cafe"),
    ("Sabine", "Hahn", "Kaffeerösterei am Hügel", "roesterei-huegel.de", "Kassel", "roaster"),
    ("Christian", "Vogt", "Office Pantry Pro", "officepantry.pro", "Berlin", "retail"),
    ("Elisabeth", "Graf", "Schlosshotel Seeblick", "schlosshotel-seeblick.de", "Konstanz", "hotel"),
    ("Tomáš", "Novák", "Roastery 47", "roastery47.cz", "Prague", "roaster"),
)
_STAGES = (["prospect"] * 10 + ["qualified"] * 7 + ["opportunity"] * 7 + ["customer"] * 14
           + ["churning"] * 5 + ["lost"] * 3 + ["recovered"] * 4)
_PRODUCTS = ("8oz double-wall cups", "12oz compostable cups", "4oz espresso cups", "16oz cold cups",
             "12oz kraft ripple cups", "recyclable paper lids")
_REGIONS = {"Amsterdam": "benelux", "Rotterdam": "benelux", "London": "uk", "Copenhagen": "nordics",
            "Oslo": "nordics", "Lisbon": "iberia", "Strasbourg": "france", "Prague": "cee"}
_CAMPAIGNS = ("spring-cafe-2025", "roaster-outreach-q2", "hotel-breakfast-2025", "office-coffee-q1")

# Story steps: name -> (agent, type, direction, subject, text variants). Subjects and texts are
# str.format templates over the contact's facts ({first}, {company}, {city}, {product}, {qty},
# {daily}, {locations}, {price}, {old_price}) and the step's own ({order}, {ticket}, {total}, {refund}).
_STEPS: dict[str, tuple[str, str, str | None, str, tuple[str, ...]]] = {
    "sequence": ("anna", "sequence_started", "outbound", "Sequence: {company}", (
        "Started the four-step outreach sequence for {first} at {company} ({city}). Angle: custom-printed "
        "{product} that are fully compostable, with 10-day delivery.",
        "Enrolled {first} from {company} in the outreach sequence. They run {locations} location(s) in "
        "{city}; we lead with free samples and a print mock-up of their logo.",
    )),
    "cold_email": ("anna", "email_sent", "outbound", "Branded cups for {company}?", (
        "Hi {first},\n\nI noticed {company} serves around {daily} drinks a day in {city}. We make "
        "custom-printed {product} that are certified compostable and ship within 10 working days. Would a "
        "free sample pack of 50 cups with a mock-up of your logo be useful?\n\nBest,\nAnna\nTop Cup",
        "Hello {first},\n\nmany cafés in {city} have moved to our {product}: no plastic lining, a sturdy "
        "feel and your logo in up to two colours. I would be glad to send samples to {company} this "
        "week.\n\nKind regards,\nAnna\nTop Cup",
    )),
    "nudge": ("anna", "nudge_sent", "outbound", "Re: Branded cups for {company}?", (
        "Hi {first}, just bumping this up in case it got buried. Happy to send the free samples to your "
        "{city} address whenever suits you. Anna",
        "Hi {first}, following up on my note from last week: the sample pack is ready to ship. Shall I "
        "send it to {company}? Anna",
    )),
    "interested": ("anna", "email_received", "inbound", "Re: Branded cups for {company}?", (
        "Hi Anna,\n\nthanks for the samples, the double-wall cups feel great and our baristas liked the "
        "lids. Can you send pricing for around {qty} units per month with our logo printed?\n\n{first}",
        "Hello Anna, we are interested. Our current cups are plastic-lined and customers keep asking "
        "about it. What would {qty} units of the {product} cost, and how fast could you deliver to {city}?",
        "Hi Anna, good timing: our contract with the current supplier ends next month. Could you send a "
        "quote for {qty} cups and your minimum order quantity? Thanks, {first}",
    )),
    "not_now": ("anna", "email_received", "inbound", "Re: Branded cups for {company}?", (
        "Hi Anna, thanks for reaching out. We are locked into our current supplier until the end of the "
        "quarter. Feel free to check back in September.",
        "Thanks for the note. Not a priority for us right now, we have enough stock for the next months. "
        "Maybe later this year.",
        "Please remove me from your mailing list, we are not interested. Regards, {first}",
    )),
    "enquiry": ("jasper", "email_received", "inbound", "Enquiry from {company}", (
        "Hello, we met your team at the Intergastra fair. {company} is looking for a new supplier of "
        "{product} for {locations} location(s). Could you send us prices for {qty} units a month?",
        "Hi, a friend at another café recommended Top Cup. We need around {qty} printed cups a month in "
        "{city}. What are your prices and lead times?",
    )),
    "discovery": ("anna", "call", "outbound", "Discovery call with {company}", (
        "Discovery call with {first}. They serve roughly {daily} drinks a day across {locations} "
        "location(s) and pay about €{old_price} per 1,000 cups today. Main pain points: lids that pop "
        "off and slow reorders. Interested in a quarterly contract. Next step: send a quote by Friday.",
        "Spoke with {first} for 25 minutes. Decision maker confirmed, budget approved for the switch to "
        "compostable cups. They want artwork support and delivery to {city} every four weeks. I will "
        "send a proposal this week.",
    )),
    "qualified": ("anna", "note", None, "Qualified: {company}", (
        "Qualified lead: {first} is the decision maker, volume about {qty} cups per month, timeline end "
        "of next month. Competitor in place: a wholesaler with plastic-lined cups.",
        "Budget confirmed by {first}. They care most about print quality and reliable delivery; price is "
        "secondary as long as we stay under €{old_price} per 1,000.",
    )),
    "quote": ("jasper", "email_sent", "outbound", "Your Top Cup quote", (
        "Hi {first},\n\nas promised here is your quote: {qty} x {product} with one-colour print at "
        "€{price} per 1,000, delivery within 10 working days. The price holds until the end of the "
        "month. Shall we book a call on Thursday to go through the artwork?\n\nBest,\nJasper",
        "Hello {first},\n\nattached is the proposal for {company}: {product}, {qty} units per month, "
        "€{price} per 1,000 including print set-up, free delivery to {city}. Happy to walk you through "
        "it on a short call.\n\nJasper\nTop Cup",
    )),
    "quote_reply": ("jasper", "email_received", "inbound", "Re: Your Top Cup quote", (
        "Hi Jasper, the quote looks good, but our finance team asked whether you can do a volume "
        "discount if we commit to a full quarter. Can we talk on Tuesday at 10?",
        "Thanks Jasper. Could you send the spec sheet for the lids and a proof of the print? We would "
        "like to decide by the end of next week.",
        "Hi Jasper, the price is a bit above what we budgeted. If you can get closer to €{price} per "
        "1,000 including delivery we can move forward this month.",
    )),
    "negotiation": ("jasper", "call", "outbound", "Negotiation call with {company}", (
        "Negotiation call with {first} and their operations manager. Agreed on artwork proofs by "
        "Wednesday. Open question: payment terms, they want 60 days. I will confirm with finance.",
        "Call with {first}: walked through the proposal, they are happy with the print proof. They asked "
        "for a 5% discount on a quarterly commitment, which I offered. Expect a decision this week.",
    )),
    "first_order": ("jasper", "order_placed", "inbound", "Order {order}", (
        "First order {order}: {qty} x {product} with custom print, total €{total}. Delivery to {city} "
        "requested for next Tuesday.",
        "{first} confirmed the first order {order} for {qty} units of {product} (€{total}). Artwork "
        "approved; production starts Monday.",
    )),
    "converted": ("anna", "sequence_completed", "outbound", "Sequence completed: {company}", (
        "Outreach sequence completed for {company}: converted to a customer and handed to account "
        "management.",
    )),
    "welcome": ("mia", "email_sent", "outbound", "Welcome to Top Cup, {first}", (
        "Hi {first},\n\nwelcome to Top Cup! I am Mia and I will be your account manager. Your first "
        "delivery is scheduled for next week; you will get the tracking link as soon as it ships. If "
        "anything is off, Luna in support is one email away.\n\nBest,\nMia",
    )),
    "ticket": ("luna", "ticket_opened", "inbound", "Problem with order {order}", (
        "Hi, our order {order} has not arrived yet and we are running low on cups at two locations. "
        "Tracking has not updated since Monday. Can you check urgently?",
        "The print on order {order} is smudged on about a third of the cups. We cannot hand these to "
        "customers. Please advise.",
        "The lids from order {order} do not fit the 12oz cups properly, several customers spilled "
        "coffee this morning. This is a problem for us.",
    )),
    "ticket_angry": ("luna", "email_received", "inbound", "Re: Problem with order {order}", (
        "This is the second time this month. Our baristas are frustrated and we had customers with "
        "coffee on their shirts. Honestly this is really disappointing.",
        "Still waiting for an answer on this. We are now buying cups at the supermarket to get by, "
        "which is ridiculous.",
    )),
    "ticket_fixed": ("luna", "ticket_resolved", "outbound", "Re: Problem with order {order}", (
        "Hi {first}, I have tracked down your package: it was held at the Leipzig depot. It has been "
        "expedited and will arrive tomorrow morning, and we have added 500 cups free of charge for the "
        "trouble. Closing this ticket, Luna",
        "Hi {first}, sorry about this. A replacement batch has been shipped by express and will arrive "
        "on Thursday; please keep the faulty cups, no need to return them. Luna",
    )),
    "thanks": ("luna", "email_received", "inbound", "Thank you!", (
        "Thanks Luna, the cups arrived and our customers love the new design. Great service!",
        "Hi, just wanted to say the new cups are perfect. Several guests asked where we got them. We "
        "will order again soon.",
        "Quick note: the delivery was on time and the print looks fantastic. Really pleased with the "
        "switch, thank you.",
    )),
    "reorder": ("mia", "order_placed", "inbound", "Reorder {order}", (
        "Reorder {order}: {units} x {product} plus 2,000 matching lids, total €{total}.",
        "Standing monthly order {order}: {units} units of {product}, €{total}, delivery to {city}.",
    )),
    "review": ("mia", "call", "outbound", "Quarterly review with {company}", (
        "Quarterly review with {first}. Volume is up 20% since spring and they are opening another "
        "location in {city} in September. Interested in 16oz cold cups for the summer menu: good upsell.",
        "Account review with {first}: happy with quality and delivery. They asked about a loyalty "
        "discount for a 12-month contract and about printed sleeves. Sending a proposal next week.",
    )),
    "upsell": ("mia", "email_received", "inbound", "Cold cups for summer", (
        "Hi Mia, we would like to add 16oz cold cups for the summer menu. Could you send prices for "
        "5,000 units with our logo?",
        "Hi Mia, following our call: please send a proposal for a 12-month contract including printed "
        "sleeves. We are planning to order around {qty} cups a month.",
    )),
    "churn_risk": ("mia", "email_received", "inbound", "Our supply situation", (
        "Honestly we are looking at other suppliers. A competitor offered us 15% less and your last two "
        "deliveries were late. Unless something changes we will not renew our contract.",
        "Mia, I have to be frank: the quality problems are costing us customers. We are considering "
        "switching to another supplier next quarter.",
    )),
    "escalation": ("luna", "email_received", "inbound", "Complaint: damaged shipment and invoice", (
        "This is unacceptable. The last shipment arrived damaged and we were charged twice on the "
        "invoice. I want to speak to your manager about this today.",
        "Third late delivery in a row. If this is not resolved this week we will dispute the charge and "
        "take this further. Please escalate to your supervisor.",
    )),
    "refund": ("luna", "refund_processed", "outbound", "Refund for order {order}", (
        "Refund of €{refund} processed for order {order} (leaking lids batch). Replacement lids have "
        "been shipped by express and will arrive tomorrow.",
        "Credited €{refund} to the account for the damaged cartons in order {order}; the duplicate "
        "invoice charge has been refunded as well.",
    )),
    "retention": ("mia", "call", "outbound", "Retention call with {company}", (
        "Retention call with {first}. They remain unhappy about delivery reliability. Offered 10% off "
        "the next two orders and a fixed delivery slot on Mondays. They will decide by the end of the "
        "month.",
        "Called {first} to apologise. Main concerns: late deliveries and the leaking lids. Proposed a "
        "quality check on every batch and a dedicated contact. Still at risk.",
    )),
    "leaving": ("mia", "email_received", "inbound", "Our decision", (
        "Hi Mia, we have decided to move to another supplier for next year. Please cancel our standing "
        "order from next month. Thanks for everything.",
        "We are going with a cheaper competitor from January. Please close our account after the last "
        "delivery. Regards, {first}",
    )),
    "lost": ("mia", "note", None, "Lost: {company}", (
        "Marked as lost: {company} switched to a cheaper wholesaler. Left the door open; revisit in six "
        "months with the new cold-cup range.",
    )),
    "win_back": ("mia", "call", "outbound", "Win-back call with {company}", (
        "Win-back call: {first} is happy with the new Monday delivery slot and the replacement lids work "
        "perfectly. Agreed to resume monthly orders.",
        "Good call with {first}: the quality checks made a difference and the last two deliveries were "
        "on time. They are staying with us and want to review volumes in autumn.",
    )),
    "back_on_track": ("mia", "email_received", "inbound", "Back on track", (
        "Thanks Mia, the last deliveries were on time and the new lids are perfect. We are happy to "
        "continue with Top Cup.",
    )),
}

# Fresh inbound messages logged without a summary: the worker summarises them.
_PENDING: tuple[tuple[str, str], ...] = (
    ("Delivery address change", "Hi, quick question: can we change the delivery address for next "
     "week's order to our new location? The old one closes on Friday. Thanks!"),
    ("Invoice question", "Hello, the last invoice shows 5,000 lids but we only received 4,000. Can you "
     "check and send a corrected invoice?"),
    ("Samples for the new menu", "We are launching an iced coffee menu in June. Could you send samples "
     "of the 16oz cold cups and the flat lids?"),
    ("Still waiting", "We are still waiting for the replacement cups you promised last week. This is "
     "getting frustrating, our stock runs out on Monday."),
    ("Pricing for next year", "Before we plan next year's budget: will your prices change in January? "
     "We would like to lock in the current price for 12 months."),
    ("Great event", "The branded cups were a hit at our summer festival, thank you! We would like to "
     "talk about the autumn events."),
)
# fmt: on


@dataclass
class _Item:
    """One interaction of the story, as log_interaction takes it."""

    agent: str
    type: str
    direction: str | None
    subject: str
    content: str
    external_id: str
    thread_id: str | None = None
    campaign_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    pending: bool = False  # logged without a summary: the worker summarises it
    offset: timedelta = timedelta(0)  # time since the story began; dated by _Story.finish


@dataclass
class _Contact:
    fields: dict[str, Any]
    creator: str
    items: list[_Item]


class _Story:
    """Builds one contact's interactions in order, the clock moving forward step by step."""

    def __init__(self, rng: random.Random, index: int, first: str, company: str, city: str) -> None:
        self.rng, self.index = rng, index
        self.clock = timedelta(0)
        self.items: list[_Item] = []
        self.v: dict[str, Any] = {
            "first": first,
            "company": company,
            "city": city,
            "product": rng.choice(_PRODUCTS),
            "qty": rng.choice((2000, 3000, 5000, 8000, 10000, 20000)),
            "locations": rng.randint(1, 12),
            "daily": rng.choice((150, 300, 450, 800, 1200)),
            "price": rng.choice((38, 42, 45, 49, 54)),
            "old_price": rng.choice((52, 55, 58, 61)),
        }

    def add(
        self,
        step: str,
        *,
        agent: str | None = None,
        ref: str | None = None,
        thread: str | None = None,
        campaign: str | None = None,
        gap: tuple[int, int] = (2, 12),
        **extra: Any,
    ) -> None:
        """Adds one step of `_STEPS` (a random text variant); `extra` fills its own placeholders and
        goes into the metadata."""
        step_agent, itype, direction, subject, variants = _STEPS[step]
        self.clock += timedelta(days=self.rng.randint(*gap), hours=self.rng.randint(1, 8))
        facts = {**self.v, **extra}
        self.items.append(
            _Item(
                agent or step_agent,
                itype,
                direction,
                subject.format(**facts),
                self.rng.choice(variants).format(**facts),
                ref or f"demo-{self.index:02d}-{len(self.items) + 1:02d}",
                thread,
                campaign,
                dict(extra),
                offset=self.clock,
            )
        )

    def finish(self, now: datetime) -> None:
        """Dates the story so that it ends in the last weeks before `now`."""
        end = now - timedelta(days=self.rng.randint(1, 40), hours=self.rng.randint(0, 12))
        for item in self.items:
            item.metadata["occurred_at"] = (end - (self.clock - item.offset)).isoformat(timespec="minutes")

    # Chapters of a contact's life; a stage's story is a sequence of them.

    def outreach(self, campaign: str, replies: bool) -> None:
        thread = f"seq-{self.index:02d}"
        self.add("sequence", thread=thread, campaign=campaign)
        self.add("cold_email", thread=thread, campaign=campaign, gap=(0, 1))
        if self.rng.random() < 0.7:
            self.add("nudge", thread=thread, campaign=campaign, gap=(4, 8))
        if replies:
            self.add("interested", thread=thread)
        elif self.rng.random() < 0.5:
            self.add("not_now", thread=thread)

    def qualify(self, agent: str) -> None:
        self.add("discovery", agent=agent, gap=(2, 6))
        if self.rng.random() < 0.5:
            self.add("qualified", agent=agent, gap=(0, 1))

    def negotiate(self, still_open: bool) -> None:
        # Only an open deal is an open thread; a won or lost one is history.
        thread = f"deal-{self.index:02d}" if still_open else None
        self.add("quote", thread=thread)
        self.add("quote_reply", thread=thread)
        if self.rng.random() < 0.6:
            self.add("negotiation", thread=thread)

    def order(self, step: str, units: int, gap: tuple[int, int] = (2, 12)) -> None:
        order = f"TC-{self.rng.randint(20000, 29999)}"
        total = units * self.v["price"] // 1000
        self.add(step, ref=order, gap=gap, order=order, units=units, total=total)

    def ticket(self, angry: bool) -> None:
        ticket = f"SUP-{self.rng.randint(4000, 9999)}"
        order = f"TC-{self.rng.randint(20000, 29999)}"
        thread = f"ticket-{ticket}"
        self.add("ticket", ref=ticket, thread=thread, ticket_id=ticket, order=order)
        if angry:
            self.add("ticket_angry", thread=thread, gap=(1, 2), order=order)
        self.add("ticket_fixed", ref=ticket, thread=thread, gap=(0, 2), ticket_id=ticket, order=order)

    def trouble(self, escalate: bool) -> None:
        self.ticket(angry=True)
        self.add("churn_risk")
        if escalate:
            self.add("escalation", gap=(1, 3))
        order = f"TC-{self.rng.randint(20000, 29999)}"
        self.add("refund", ref=order, gap=(0, 2), order=order, refund=self.rng.choice((180, 240, 390, 620)))
        self.add("retention")


def _story(rng: random.Random, i: int, person: tuple[str, ...], stage: str) -> tuple[_Story, bool]:
    """The interactions of one contact at `stage`; also whether they came in by themselves."""
    first, _, company, _, city, _ = person
    story = _Story(rng, i, first, company, city)
    inbound = stage not in ("prospect", "qualified") and rng.random() < 0.35
    if stage == "prospect":
        story.outreach(rng.choice(_CAMPAIGNS), replies=False)
        return story, inbound
    if inbound:
        story.add("enquiry")
    else:
        story.outreach(rng.choice(_CAMPAIGNS), replies=True)
    story.qualify("jasper" if inbound else "anna")
    if stage == "qualified":
        return story, inbound
    story.negotiate(still_open=stage == "opportunity")
    if stage == "opportunity":
        return story, inbound
    story.order("first_order", story.v["qty"])
    if not inbound:
        story.add("converted", thread=f"seq-{i:02d}", gap=(0, 1))
    story.add("welcome", gap=(0, 2))
    for _ in range(rng.randint(1, 3)):
        story.order("reorder", story.v["qty"] * rng.choice((1, 1, 2)), gap=(20, 40))
    if stage == "customer":
        if rng.random() < 0.6:
            story.ticket(angry=False)
        story.add("thanks", agent=rng.choice(("luna", "mia")))
        if rng.random() < 0.6:
            story.add("review", gap=(10, 30))
            if rng.random() < 0.5:
                story.add("upsell")
        return story, inbound
    story.trouble(escalate=rng.random() < 0.4)
    if stage == "lost":
        story.add("leaving", gap=(5, 20))
        story.add("lost", gap=(0, 1))
    elif stage == "recovered":
        story.add("win_back", gap=(10, 25))
        story.order("reorder", story.v["qty"])
        story.add("back_on_track")
    return story, inbound


def _ascii(text: str) -> str:
    """An email-friendly form of a name: Jürgen Groß -> juergengross, Tomáš -> tomas."""
    text = text.lower().replace(" ", "")
    for umlaut, plain in (("ä", "ae"), ("ö", "oe"), ("ü", "ue"), ("ß", "ss")):
        text = text.replace(umlaut, plain)
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def build_demo(now: datetime) -> list[_Contact]:
    """The whole data set from `random.Random(42)`, built before anything is written, so every run
    builds the same contacts and interactions (only the story dates follow `now`)."""
    rng = random.Random(42)
    stages = list(_STAGES)
    rng.shuffle(stages)
    owners: dict[str, tuple[str | None, ...]] = {
        "prospect": ("anna",),
        "qualified": ("anna", "jasper"),
        "opportunity": ("jasper",),
        "customer": ("mia", "mia", "luna"),
        "churning": ("mia",),
        "lost": (None,),
        "recovered": ("mia",),
    }
    people: list[_Contact] = []
    for i, (person, stage) in enumerate(zip(_PEOPLE, stages, strict=True)):
        first, last, company, domain, city, segment = person
        story, inbound = _story(rng, i, person, stage)
        story.finish(now)
        tags = {segment, _REGIONS.get(city, "dach")}
        tags.update(rng.sample(("eco-packaging", "custom-print", "high-volume", "seasonal", "multi-site"), 2))
        if stage in ("customer", "recovered") and rng.random() < 0.4:
            tags.add("vip")
        custom: dict[str, Any] = {
            "segment": segment,
            "city": city,
            "locations": story.v["locations"],
            "drinks_per_day": story.v["daily"],
            "preferred_product": story.v["product"],
        }
        if stage in ("customer", "churning", "recovered"):
            custom["account_tier"] = rng.choice(("bronze", "silver", "gold"))
            custom["payment_terms_days"] = rng.choice((14, 30, 60))
        fields = {
            "email": _ascii(rng.choice((f"{first}.{last}", first, f"{first[0]}.{last}"))) + "@" + domain,
            "name": f"{first} {last}",
            "company_name": company,
            "phone": f"+49 {rng.randint(30, 89)} {rng.randint(1000000, 9999999)}",
            "stage": stage,
            "source": rng.choice(("inbound_form", "referral", "trade_show")) if inbound else "anna_outbound",
            "owner_agent": rng.choice(owners[stage]),
            # Big deals get a human sales rep alongside Jasper.
            "owner_human_id": "jedd-123" if stage == "opportunity" and story.v["qty"] >= 10000 else None,
            "tags": sorted(tags),
            "custom_fields": custom,
        }
        people.append(_Contact(fields, "jasper" if inbound else "anna", story.items))
    candidates = [p for p in people if p.fields["stage"] in ("customer", "churning", "recovered", "opportunity")]
    for n, (person_, (subject, text)) in enumerate(zip(rng.sample(candidates, len(_PENDING)), _PENDING, strict=True)):
        agent = {"opportunity": "jasper", "churning": "mia"}.get(person_.fields["stage"], "luna")
        metadata = {"occurred_at": now.isoformat(timespec="minutes")}
        person_.items.append(
            _Item(agent, "email_received", "inbound", subject, text, f"demo-pending-{n}", None, None, metadata, True)
        )
    return people


@dataclass
class DemoMemory:
    """A memory the demo writes through `remember` as `agent`. Links point at "agent:<name>" (an
    agent's entity node) or at the key of an earlier demo memory."""

    agent: str
    key: str
    kind: str
    title: str
    body: str = ""
    importance: float | None = None
    confidence: float | None = None
    links: tuple[tuple[str, str, float], ...] = ()


# Per agent: (role line, colleague, preferences, capabilities, decisions, events, patterns with two
# observations each, goals, a contradiction (claim, counter), a low-confidence fact).
_CORNERS: dict[str, dict[str, Any]] = {
    "luna": {
        "colleague": "mia",
        "prefs": ("Luna answers customers in plain language, no jargon", "Luna signs off with her first name"),
        "facts": (
            "Luna can refund orders up to 200 EUR without approval",
            "Luna handles tickets in German and English",
        ),
        "decisions": (
            "Decided to refund damaged lid shipments in full without a return",
            "Decided to send replacement sleeves by express for hotel customers",
            "Decided to answer refund tickets before new questions each morning",
        ),
        "events": (
            "Luna resolved the cracked-lid ticket from Kaffeehaus Mitte",
            "Luna escalated a late pallet to Mia",
            "Luna closed twelve support tickets today",
            "Luna updated the refund macro",
            "Luna called the courier about a lost parcel",
            "Luna flagged a repeat complaint about leaking lids",
        ),
        "patterns": (
            (
                "Damage complaints rise after hot weeks",
                ("Four cracked-lid tickets during the June heat", "Leaking lids reported twice in the August heat"),
            ),
            (
                "Customers who get a same-day answer rarely escalate",
                ("No escalations from tickets answered same day", "Two escalations followed a two-day wait"),
            ),
        ),
        "goals": ("Answer every support ticket within four hours", "Keep refunds under two percent of revenue"),
        "conflict": (
            "Compostable lids are covered by the supplier warranty",
            "The supplier warranty excludes compostable lids",
        ),
        "unsure": "The new lid supplier may ship a week late",
    },
    "mia": {
        "colleague": "luna",
        "prefs": ("Mia reviews churn risks every Monday", "Mia prefers a call over email for unhappy customers"),
        "facts": ("Mia can grant discounts up to 15 percent", "Mia owns the gold-tier accounts"),
        "decisions": (
            "Decided to offer churning cafes a free sleeve design",
            "Decided to move gold accounts to 60-day payment terms",
            "Decided to call every churning account before its renewal",
        ),
        "events": (
            "Mia renewed the Hotel Adler contract",
            "Mia sent the quarterly account review to Roastery Nord",
            "Mia logged a churn warning for Cafe Sonne",
            "Mia agreed a price freeze with Office Hub",
            "Mia handed an upsell lead to Jasper",
            "Mia updated the gold-tier price list",
        ),
        "patterns": (
            (
                "Accounts that skip two orders are about to churn",
                ("Cafe Sonne skipped two orders before leaving", "Two skipped orders preceded Bistro Blau's notice"),
            ),
            (
                "Price freezes keep multi-site customers",
                ("Office Hub stayed after a price freeze", "Both multi-site hotels renewed with frozen prices"),
            ),
        ),
        "goals": ("Keep annual churn below eight percent", "Renew every gold account on time"),
        "conflict": ("Gold accounts pay within 30 days", "Gold accounts pay within 60 days"),
        "unsure": "Cafe Sonne may return next spring",
    },
    "anna": {
        "colleague": "jasper",
        "prefs": ("Anna writes short first emails with one question", "Anna follows up after three working days"),
        "facts": ("Anna runs the outbound sequences", "Anna qualifies leads before handing them to Jasper"),
        "decisions": (
            "Decided to lead outreach with the compostable range",
            "Decided to target roasteries in Hamburg this month",
            "Decided to stop cold calls on Fridays",
        ),
        "events": (
            "Anna started a sequence for ten Hamburg roasteries",
            "Anna booked a sample call with Rosterei Elbe",
            "Anna handed a qualified lead to Jasper",
            "Anna sent samples to Cafe Lindner",
            "Anna logged three replies to the spring campaign",
            "Anna cleaned the prospect list",
        ),
        "patterns": (
            (
                "Roasteries reply to sample offers, not price lists",
                ("Three roasteries answered the sample email", "No roastery answered the price list"),
            ),
            (
                "Tuesday emails get the most replies",
                ("Half the replies came to Tuesday emails", "Friday emails got one reply in a month"),
            ),
        ),
        "goals": ("Book ten sample calls a month", "Qualify five leads for Jasper every week"),
        "conflict": ("Rosterei Elbe buys 5,000 cups a month", "Rosterei Elbe buys 500 cups a month"),
        "unsure": "Cafe Lindner may be opening a second site",
    },
    "jasper": {
        "colleague": "anna",
        "prefs": ("Jasper sends quotes within one working day", "Jasper closes with a call, never by email alone"),
        "facts": ("Jasper can approve volume prices above 10,000 cups", "Jasper works big deals with Jedd"),
        "decisions": (
            "Decided to quote custom print at cost for first orders",
            "Decided to bundle lids with cups in every quote",
            "Decided to offer a pilot month to hotel chains",
        ),
        "events": (
            "Jasper sent a quote to Hotel Kranz",
            "Jasper closed the Office Hub order",
            "Jasper held a pilot review with Hotel Adler",
            "Jasper revised the bundle price sheet",
            "Jasper lost the Bistro Blau deal on price",
            "Jasper booked a tasting with Cafe Lindner",
        ),
        "patterns": (
            (
                "Bundled quotes close faster",
                ("The last three bundled quotes closed within a week", "Unbundled quotes took a month on average"),
            ),
            (
                "Pilots convert hotel chains",
                ("Hotel Adler signed after its pilot month", "Both pilots this year became contracts"),
            ),
        ),
        "goals": ("Close 40,000 EUR of new business this quarter", "Answer every quote request within a day"),
        "conflict": ("Hotel Kranz decides in March", "Hotel Kranz decides in June"),
        "unsure": "Hotel Kranz may ask for a second pilot",
    },
    "helios": {
        "colleague": "mia",
        "prefs": ("Helios reports only what needs a human", "Helios summarises alerts once an hour"),
        "facts": ("Helios watches parked jobs and failed webhooks", "Helios may read every agent's briefing"),
        "decisions": (
            "Decided to alert on any job parked twice",
            "Decided to page a human for churn escalations",
            "Decided to mute duplicate webhook failures for an hour",
        ),
        "events": (
            "Helios raised an alert about a parked summary job",
            "Helios saw the webhook endpoint recover",
            "Helios noted a spike in escalations",
            "Helios checked the token budget of Jasper",
            "Helios confirmed the nightly context refresh",
            "Helios reviewed the handoff backlog",
        ),
        "patterns": (
            (
                "Webhook failures come in bursts",
                (
                    "Five webhook failures in ten minutes on Tuesday",
                    "The endpoint failed three times in a row on Friday",
                ),
            ),
            (
                "Escalations follow late deliveries",
                ("Two escalations the day after a late pallet", "Escalations rose during the courier strike"),
            ),
        ),
        "goals": ("Keep the parked-job count at zero", "Flag budget overruns before noon"),
        "conflict": ("The webhook endpoint retries for six hours", "The webhook endpoint retries for one hour"),
        "unsure": "The courier strike may continue next week",
    },
}


def build_memories() -> list[DemoMemory]:
    """Every agent's corner of the memory graph, in write order (a link's target comes first)."""
    out: list[DemoMemory] = []
    for agent, c in _CORNERS.items():
        me = f"agent:{agent}"

        def key(name: str, agent: str = agent) -> str:
            return f"demo:{agent}:{name}"

        for n, title in enumerate(c["prefs"]):
            out.append(
                DemoMemory(
                    agent, key(f"pref{n}"), "preference", title, importance=0.7, links=((me, "applies_to", 0.9),)
                )
            )
        for n, title in enumerate(c["facts"]):
            out.append(
                DemoMemory(agent, key(f"fact{n}"), "fact", title, importance=0.7, links=((me, "applies_to", 0.9),))
            )
        for n, title in enumerate(c["decisions"]):
            out.append(
                DemoMemory(agent, key(f"decision{n}"), "decision", title, importance=0.7,
                           links=((f"agent:{c['colleague']}", "mentions", 0.6),))
            )  # fmt: skip
        for n, title in enumerate(c["events"]):
            out.append(
                DemoMemory(
                    agent, key(f"event{n}"), "event", title, links=((key(f"decision{n % 3}"), "relates_to", 0.6),)
                )
            )
        for n, (title, observations) in enumerate(c["patterns"]):
            out.append(
                DemoMemory(
                    agent, key(f"pattern{n}"), "pattern", title, importance=0.8, links=((me, "applies_to", 0.8),)
                )
            )
            for m, seen in enumerate(observations):
                out.append(
                    DemoMemory(agent, key(f"pattern{n}:seen{m}"), "observation", seen,
                               links=((key(f"pattern{n}"), "instance_of", 0.8),))
                )  # fmt: skip
        for n, title in enumerate(c["goals"]):
            out.append(
                DemoMemory(agent, key(f"goal{n}"), "goal", title, importance=0.8, links=((me, "applies_to", 0.8),))
            )
        claim, counter = c["conflict"]
        out.append(DemoMemory(agent, key("claim"), "fact", claim, importance=0.6))
        out.append(
            DemoMemory(
                agent, key("counter"), "fact", counter, importance=0.6, links=((key("claim"), "contradicts", 0.8),)
            )
        )
        out.append(DemoMemory(agent, key("unsure"), "fact", c["unsure"], importance=0.5, confidence=0.3))
    return out


def memory_writer(agent: str) -> tuple[str, str | None]:
    """Who writes an agent's demo memories, and for whom: the agent itself, or the system agent
    (an admin) for a read-only agent."""
    read_only = {name for name, _, _, ro, *_ in AGENTS if ro}
    return ("system", agent) if agent in read_only else (agent, None)


# --- loading ---------------------------------------------------------------------------------------


def _ensure_tenant(conn: psycopg.Connection[Any], reset: bool) -> tuple[str, bool]:
    """The demo tenant's id (created when absent, with its agents) and whether the demo is loaded."""
    found = db.call(conn, "cortex.resolve_tenant", p_ref=TENANT_SLUG)
    if found is not None and reset:
        db.call(conn, "cortex.delete_tenant", p_tenant_id=found)
        found = None
    if found is None:
        found = db.call(conn, "cortex.create_tenant", p_name=TENANT_NAME, p_slug=TENANT_SLUG, p_time_zone=TIME_ZONE)
        loaded = False
    else:
        loaded = "demo" in (db.call(conn, "cortex.tenant_config", p_tenant_id=found) or {})
    tenant_id = str(found)
    have = {r["name"] for r in db.rows(conn, "cortex.list_agents", p_tenant_id=tenant_id)}
    for name, display, role, read_only, max_input, budget in AGENTS:
        if name not in have:
            db.call(
                conn,
                "cortex.create_agent",
                p_tenant_id=tenant_id,
                p_name=name,
                p_display_name=display,
                p_role=role,
                p_read_only=read_only,
                p_max_input_tokens=max_input,
                p_daily_token_budget=budget,
            )
    return tenant_id, loaded


def _load(tenant_id: str, now: datetime) -> None:
    """Writes the data set through the agents' own API functions."""
    # Imported here: it loads the Anthropic SDK (slow to import).
    from cortex.interactions import service as interactions

    for person in build_demo(now):
        created = contacts.upsert_contact(db.agent_claims(tenant_id, person.creator), **person.fields)
        for item in person.items:
            claims = db.agent_claims(tenant_id, item.agent)
            args: dict[str, Any] = {
                "contact_id": created["id"],
                "type": item.type,
                "direction": item.direction,
                "subject": item.subject,
                "raw_content": item.content,
                "external_id": item.external_id,
                "thread_id": item.thread_id,
                "campaign_id": item.campaign_id,
                "metadata": item.metadata,
            }
            if item.pending:
                # Straight to SQL without a summary, as a PostgREST caller would: a summarise job is queued.
                with db.as_caller(claims) as conn:
                    db.call(conn, "log_interaction", **args)
            else:
                interactions.log_interaction(claims, **args)
    _load_memories(tenant_id)


def _load_memories(tenant_id: str) -> None:
    """Writes every agent's demo memories through `remember` and turns on Luna's pre-computation."""
    with psycopg.connect(get_settings().database_url, autocommit=True) as conn:
        for memory in build_memories():
            writer, for_agent = memory_writer(memory.agent)
            with db.as_caller(db.agent_claims(tenant_id, writer), conn) as c:
                links = [
                    {"target_id": _link_target(c, t), "relation": relation, "weight": weight}
                    for t, relation, weight in memory.links
                ]
                db.call(
                    c,
                    "remember",
                    kind=memory.kind,
                    title=memory.title,
                    body=memory.body or None,
                    importance=db.typed(memory.importance, "real") if memory.importance is not None else None,
                    confidence=db.typed(memory.confidence, "real") if memory.confidence is not None else None,
                    key=memory.key,
                    links=Jsonb(links) if links else None,
                    agent=for_agent,
                )
        for agent in PRECOMPUTE:
            db.call(
                conn, "cortex.set_briefing_settings", p_tenant_id=tenant_id, p_agent=agent,
                p_settings=Jsonb({"precompute": True}),
            )  # fmt: skip


def _link_target(conn: psycopg.Connection[Any], target: str) -> str:
    """The node id of "agent:<name>" or of a demo memory's key (as the writing agent sees it)."""
    kind, _, ref = target.partition(":")
    if kind == "agent":
        row = conn.execute(
            "select id from cortex.memory_nodes where ref_kind = 'agent' and ref_id = %s", (ref,)
        ).fetchone()
    else:
        row = conn.execute(
            "select id from cortex.memory_nodes where key = %s and status = 'active' and scope = ''", (target,)
        ).fetchone()
    assert row is not None, f"no demo node {target}"
    return str(row[0])


def _read_keys(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    keys = data.get("keys") if isinstance(data, dict) else None
    return {k: v for k, v in keys.items() if isinstance(v, str)} if isinstance(keys, dict) else {}


def _write_keys(path: Path, tenant_id: str, keys: dict[str, str]) -> None:
    # Written to a private temporary file and renamed, so the keys are never world-readable.
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"tenant": TENANT_SLUG, "tenant_id": tenant_id, "keys": keys}, fh, indent=2)
        fh.write("\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _ensure_keys(conn: psycopg.Connection[Any], tenant_id: str, path: Path) -> dict[str, str]:
    """The demo agents' keys: those in `path` that still authenticate as their agent, new ones otherwise."""
    old = _read_keys(path)
    keys: dict[str, str] = {}
    for name, *_ in AGENTS:
        key = old.get(name)
        if key:
            claims = db.call(conn, "cortex.authenticate_key", p_key=key)
            if claims and claims.get("tenant_id") == tenant_id and claims.get("agent") == name:
                keys[name] = key
                continue
        keys[name] = db.call(conn, "cortex.create_agent_key", p_tenant_id=tenant_id, p_agent=name, p_label="demo")
    if keys != old or not path.exists():
        _write_keys(path, tenant_id, keys)
    return keys


def load_demo(database_url: str, reset: bool = False, *, keys_file: Path = DEFAULT_KEYS_FILE) -> DemoInfo:
    """Loads the Top Cup demo tenant into `database_url` and returns its id, keys and counts.

    Idempotent: when the tenant already holds the demo, no data is written, and keys in `keys_file`
    that still authenticate are reused. `reset` deletes the tenant first (as the owner).
    """
    use_database(database_url)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("select pg_advisory_lock(%s)", (_LOCK,))
        tenant_id, loaded_before = _ensure_tenant(conn, reset)
        if not loaded_before:
            # An interrupted earlier load is completed, not doubled: contacts upsert by email and
            # interactions deduplicate on their external_id.
            _load(tenant_id, datetime.now(UTC).replace(second=0, microsecond=0))
            db.call(conn, "cortex.request_tenant_context_refresh", p_tenant_id=tenant_id, p_reason="demo")
            loaded_at = datetime.now(UTC).isoformat()
            demo = {"demo": {"version": DEMO_VERSION, "loaded_at": loaded_at}}
            db.call(conn, "cortex.merge_tenant_config", p_tenant_id=tenant_id, p_config=demo)
        keys = _ensure_keys(conn, tenant_id, keys_file)
        stats = db.call(conn, "cortex.tenant_stats", p_tenant_id=tenant_id)
        conn.execute("select pg_advisory_unlock(%s)", (_LOCK,))
    return DemoInfo(
        tenant_id,
        keys,
        int(stats["contacts"]),
        int(stats["interactions"]),
        loaded=not loaded_before,
        queued_jobs=int(stats["queued_jobs"]),
    )
