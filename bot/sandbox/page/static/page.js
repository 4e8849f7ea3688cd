// The sandbox page's script: keeps who/where in the URL, swaps in server-rendered panes on every
// server-sent "changed" event, and posts what the person does to /sandbox/act. No markup is built
// here from data: every piece of HTML comes from the server, escaped there.
"use strict";
(function () {
  const S = JSON.parse(document.getElementById("boot").textContent);
  const $ = (id) => document.getElementById(id);
  let busy = false, again = false;

  function query() {
    const p = new URLSearchParams({ user: S.user, channel: S.channel });
    if (S.thread) p.set("thread", S.thread);
    if (S.home) p.set("home", "1");
    return p.toString();
  }

  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      history.replaceState(null, "", "/?" + query());
      const r = await fetch("/sandbox/pane?" + query());
      if (!r.ok) return;
      const p = await r.json();
      if ($("main").dataset.html !== p.main) {
        // Like Slack: a channel or thread read to its end stays at its end when messages arrive.
        const atEnd = {};
        $("main").querySelectorAll("section").forEach((s) => {
          atEnd[s.className] = s.scrollTop + s.clientHeight >= s.scrollHeight - 24;
        });
        $("main").innerHTML = p.main;
        $("main").dataset.html = p.main;
        $("main").querySelectorAll("section").forEach((s) => {
          if (atEnd[s.className] !== false) s.scrollTop = s.scrollHeight;
        });
      }
      tick();
      if ($("nav").dataset.html !== p.nav) { $("nav").innerHTML = p.nav; $("nav").dataset.html = p.nav; }
      $("title").textContent = p.title;
      const root = $("modal-root");
      if (root.dataset.key !== p.modal_key) { root.innerHTML = p.modal; root.dataset.key = p.modal_key; }
      document.body.classList.toggle("has-thread", !!S.thread && !S.home);
      document.body.classList.toggle("has-modal", !!p.modal);
      $("say").placeholder = S.home ? "Type /signoff pending" : (S.thread ? "Reply in thread" : "Message, or /signoff help");
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }

  // "requested just now" stays true: every <time data-ago> is rewritten from the page's clock, on a tick and
  // after each swap (the server renders with its own clock; nothing changes state when only time passes).
  function ago(seconds) {
    if (seconds < 0) return "in the future";
    for (const [size, unit] of [[86400, "day"], [3600, "hour"], [60, "minute"]]) {
      if (seconds >= size) { const n = Math.floor(seconds / size); return n + " " + unit + (n !== 1 ? "s" : "") + " ago"; }
    }
    return "just now";
  }
  function tick() {
    const now = Date.now() / 1000;
    document.querySelectorAll("time[data-ago]").forEach((t) => {
      const text = t.dataset.fmt.replace("\ue000", ago(Math.floor(now - Number(t.dataset.ago))));
      if (t.textContent !== text) t.textContent = text;
    });
  }
  setInterval(tick, 15000);

  function toast(text) {
    const t = $("toast");
    t.textContent = text; t.hidden = false;
    setTimeout(() => { t.hidden = true; }, 4000);
  }

  async function act(body) {
    body.user = S.user;
    const r = await fetch("/sandbox/act", { method: "POST", headers: { "Content-Type": "application/json" },
                                             body: JSON.stringify(body) });
    const out = await r.json().catch(() => ({}));
    if (!r.ok || out.error) toast(out.error || ("HTTP " + r.status));
    refresh();
    return out;
  }

  // The values of every form element in a message, Home or a modal: {block_id: {action_id: value}}.
  function collect(container) {
    const raw = {};
    container.querySelectorAll("[data-action][data-type]").forEach((el) => {
      const type = el.dataset.type;
      if (type === "button") return;
      let value;
      if (type === "checkboxes") value = [...el.querySelectorAll("input:checked")].map((i) => i.value);
      else if (type === "radio_buttons") { const c = el.querySelector("input:checked"); value = c ? c.value : null; }
      else if (el.multiple) value = [...el.selectedOptions].map((o) => o.value);
      else value = el.value;
      (raw[el.dataset.block] = raw[el.dataset.block] || {})[el.dataset.action] = value;
    });
    return raw;
  }

  // Copy a <pre>'s text (the sandbox's `export` lines); where the clipboard is refused, select it instead.
  function copy(id) {
    const el = $(id);
    const select = () => { const r = document.createRange(); r.selectNodeContents(el);
                           const s = getSelection(); s.removeAllRanges(); s.addRange(r); };
    if (navigator.clipboard) navigator.clipboard.writeText(el.textContent).then(() => toast("Copied"), select);
    else select();
  }

  document.addEventListener("click", (e) => {
    const t = e.target.closest("button, [data-open-thread]");
    if (!t) return;
    if (t.dataset.copy) { copy(t.dataset.copy); return; }
    if (t.dataset.openThread) { S.thread = t.dataset.openThread; refresh(); return; }
    if (t.classList.contains("close-thread")) { S.thread = null; refresh(); return; }
    if (t.dataset.home) { S.home = true; S.thread = null; act({ kind: "home" }); return; }
    if (t.dataset.channel) { S.channel = t.dataset.channel; S.home = false; S.thread = null; refresh(); return; }
    if (t.classList.contains("close-modal")) {
      act({ kind: "close", view_id: t.closest("[data-view]").dataset.view }); return;
    }
    if (t.dataset.action !== undefined && t.dataset.type === "button") {
      if (t.dataset.confirm && !confirm(t.dataset.confirm)) return;
      const view = t.closest("[data-view]");
      const msg = t.closest("article.msg");
      const body = { kind: "action", action_id: t.dataset.action, block_id: t.dataset.block, value: t.dataset.value,
                     raw: collect(view || msg || document) };
      if (view) body.view_id = view.dataset.view;
      else if (msg) { body.channel = msg.dataset.channel; body.ts = msg.dataset.ts; }
      act(body);
    }
  });

  document.addEventListener("submit", (e) => {
    e.preventDefault();
    const f = e.target;
    if (f.id === "composer") {
      const text = $("say").value.trim();
      if (!text) return;
      $("say").value = "";
      act({ kind: "message", channel: S.channel, thread_ts: S.home ? null : S.thread, text: text });
    } else if (f.classList.contains("modal")) {
      act({ kind: "submit", view_id: f.dataset.view, raw: collect(f) });
    }
  });

  $("who").addEventListener("change", (e) => { S.user = e.target.value; S.thread = null;
                                               if (S.home) act({ kind: "home" }); else refresh(); });

  const events = new EventSource("/sandbox/events");
  events.onmessage = () => refresh();
  $("main").dataset.html = $("main").innerHTML;
  refresh();
})();
