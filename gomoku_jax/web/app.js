// gomoku-jax play: draws what the server sends, posts what the player clicks.
// The game lives on the server (gomoku_jax.play); this page keeps no rules of its own.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

let state = null;       // the server's last STATE (see gomoku_jax/play.py)
let busy = false;       // a request is in flight: clicks wait
let shownAnalysis = null;  // the analysis drawn on the board (agent's last move or "Analyse")

// ------------------------------------------------------------------ requests
async function api(method, path, body) {
  const options = { method, headers: {} };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  let data;
  try {
    data = await response.json();
  } catch (e) {
    throw new Error(`${path}: the server sent no JSON (HTTP ${response.status})`);
  }
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

async function run(task) {
  if (busy) return;
  busy = true;
  showError("");
  render();
  try {
    await task();
  } catch (e) {
    showError(e.message);
  } finally {
    busy = false;
    render();
  }
}

// ------------------------------------------------------------------- actions
async function replyIfAgentsTurn() {
  while (state && state.turn === "agent") {
    setStatus(`${state.agent.name} is thinking`, true);
    state = await api("POST", "/api/reply", {});
    shownAnalysis = state.analysis;
    render();
  }
}

function play(row, col) {
  if (busy || !state || state.turn !== "human" || state.board[row][col] !== 0) return;
  run(async () => {
    state = await api("POST", "/api/move", { row, col });
    shownAnalysis = null;
    render();
    await replyIfAgentsTurn();
  });
}

function newGame(event) {
  if (event) event.preventDefault();
  run(async () => {
    // The fields must describe the agent asked for: Enter in the agent box fires this
    // with the box's change, before the server has described the new agent.
    await infoPending;
    if (agentName() !== describedAgent) await agentChanged();
    const body = { colour: $("colour").value, agent: agentName() };
    const budget = $("budget");
    body.budget = !budget.disabled && budget.value !== "" ? Number(budget.value) : null;
    // The board asked for; an agent from a file brings its own (the fields are locked then).
    if (!$("size").disabled) {
      body.game = { size: Number($("size").value), k: Number($("k").value), rule: $("rule").value };
    }
    state = await api("POST", "/api/new", body);
    shownAnalysis = null;
    syncSettings();
    render();
    await replyIfAgentsTurn();
  });
}

function undo() {
  run(async () => {
    state = await api("POST", "/api/undo", {});
    shownAnalysis = null;
  });
}

function analyse() {
  run(async () => {
    const answer = await api("POST", "/api/analyse", {});
    shownAnalysis = answer.analysis;
    $("overlay").checked = true;
    if (!answer.analysis) $("overlay-note").textContent = answer.note;
  });
}

// The agent the box names (left empty: the heuristic).
function agentName() {
  return $("agent").value.trim() || "heuristic";
}

let infoRequest = 0;
let infoPending = Promise.resolve();  // the description of the agent last typed
let describedAgent = null;  // the agent name the budget and board fields are set for
function agentChanged() {
  infoPending = describeAgent();
  return infoPending;
}

async function describeAgent() {
  const name = agentName();
  const mine = ++infoRequest;
  try {
    const info = await api("GET", "/api/agent-info?name=" + encodeURIComponent(name));
    if (mine !== infoRequest) return;
    if (!busy) showError("");
    setAgentInfo(info, true);
    describedAgent = name;
  } catch (e) {
    if (mine === infoRequest) {
      $("agent-note").textContent = e.message;
    }
  }
}

function setAgentInfo(info, fillDefault) {
  const budget = $("budget");
  if (info.budget) {
    budget.disabled = false;
    if (fillDefault || budget.value === "") budget.value = info.budget.value ?? info.budget.default;
    budget.placeholder = `default ${info.budget.default}`;
  } else {
    budget.disabled = true;
    budget.value = "";
    budget.placeholder = "no search budget";
  }
  const game = info.game;
  const locked = $("size").disabled;
  if (info.own_game) {  // a file's game, shown locked; the board chosen before is kept
    if (!locked) chosenBoard = boardFields();
    setBoardFields(game);
  } else if (locked && chosenBoard) {
    setBoardFields(chosenBoard);
  }
  for (const id of BOARD_FIELDS) $(id).disabled = Boolean(info.own_game);
  $("agent-note").textContent =
    (info.budget ? "A search agent: set its simulations per move. " : "This agent takes no budget. ") +
    (info.overlay ? "It can show its policy and value." : "It has no policy or value to show.") +
    (game && info.own_game ? ` Plays its file's game: ${game.size}x${game.size}, ${game.k} in ` +
      `a row (${game.rule}).` : "");
}

const BOARD_FIELDS = ["size", "k", "rule"];
let chosenBoard = null;  // the board fields as they were before a file's game locked them
function boardFields() {
  return { size: $("size").value, k: $("k").value, rule: $("rule").value };
}

function setBoardFields(game) {
  $("size").value = game.size;
  $("k").value = game.k;
  $("rule").value = game.rule;
}

function syncSettings() {
  if (!state) return;
  $("colour").value = state.human;
  $("agent").value = state.agent.name;
  if (!$("size").disabled) setBoardFields(state.game);
  setAgentInfo(state.agent, true);
  describedAgent = state.agent.name;
}

// -------------------------------------------------------------------- drawing
function el(name, attrs, parent) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function starPoints(n) {
  if (n < 9) return [];
  const edge = n >= 13 ? 3 : 2;
  const far = n - 1 - edge, mid = (n - 1) / 2;
  const points = [[edge, edge], [edge, far], [far, edge], [far, far]];
  if (n % 2 === 1) points.push([mid, mid]);
  return points;
}

function setStatus(text, thinking) {
  const box = $("status");
  box.textContent = "";
  const span = document.createElement("span");
  span.textContent = text;
  if (thinking) span.className = "thinking";
  box.appendChild(span);
  box.dataset.over = state && state.over ? "true" : "false";
}

function statusText() {
  if (!state) return "Loading";
  if (state.over) {
    const you = state.winner === state.human;
    const suffix = state.winner === null ? "" : you ? ": you win!" : `: ${state.agent.name} wins`;
    return `Game over, ${state.result}${suffix}`;
  }
  if (state.turn === "human") return `Your move (${state.to_move})`;
  return `${state.agent.name} (${state.to_move}) to move`;
}

function renderBoard() {
  const holder = $("board");
  holder.textContent = "";
  if (!state) return;
  const n = state.game.size;
  const cell = 40, margin = 1.3 * cell, size = (n - 1) * cell + 2 * margin;
  const at = (i) => margin + i * cell;
  const svg = el("svg", { viewBox: `0 0 ${size} ${size}`, width: size, height: size,
                          role: "img", "aria-label": statusText() }, holder);
  if (busy || state.turn !== "human") svg.classList.add("board-locked");
  el("rect", { class: "wood", x: 0, y: 0, width: size, height: size, rx: 8,
               fill: "#dcb35c", stroke: "#b0843a", "stroke-width": 3 }, svg);
  const grid = el("g", { stroke: "#3a2a12", "stroke-width": 1.3, "stroke-linecap": "square" }, svg);
  for (let i = 0; i < n; i++) {
    el("line", { class: "grid-row", x1: at(0), y1: at(i), x2: at(n - 1), y2: at(i) }, grid);
    el("line", { class: "grid-col", x1: at(i), y1: at(0), x2: at(i), y2: at(n - 1) }, grid);
  }
  for (const [r, c] of starPoints(n)) {
    el("circle", { class: "star", cx: at(c), cy: at(r), r: 4, fill: "#3a2a12" }, svg);
  }
  const labels = el("g", { "font-family": "Helvetica, Arial, sans-serif", "font-size": 14,
                           fill: "#3a2a12", "dominant-baseline": "central" }, svg);
  for (let i = 0; i < n; i++) {
    el("text", { class: "coord col", x: at(i), y: margin * 0.3, "text-anchor": "middle" },
       labels).textContent = i;
    el("text", { class: "coord row", x: margin * 0.3, y: at(i), "text-anchor": "middle" },
       labels).textContent = i;
  }

  // The agent's view: heat per cell (its search visits, prior or Q) and the move it chose.
  const analysis = $("overlay").checked ? shownAnalysis : null;
  if (analysis) {
    let top = 0;
    for (const row of analysis.heat) for (const v of row) top = Math.max(top, v);
    const heat = el("g", { class: "heat", fill: "#1f5fd6" }, svg);
    for (let r = 0; r < n; r++) {
      for (let c = 0; c < n; c++) {
        const v = analysis.heat[r][c];
        if (!(v > 0) || top <= 0 || state.board[r][c] !== 0 && !isMove(analysis.move, r, c)) continue;
        const side = cell * 0.86;
        const square = el("rect", { class: "heat-cell", x: at(c) - side / 2, y: at(r) - side / 2,
                                    width: side, height: side, rx: 5,
                                    "fill-opacity": (0.1 + 0.7 * v / top).toFixed(3) }, heat);
        el("title", {}, square).textContent = `(${r}, ${c}) ${v}`;
        if (v / top >= 0.08) {
          el("text", { class: "heat-label", x: at(c), y: at(r) + cell * 0.33, "font-size": 9,
                       "text-anchor": "middle", fill: "#0b2a66" }, heat).textContent =
            Math.round(100 * v) + "%";
        }
      }
    }
  }

  // Stones.
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      const v = state.board[r][c];
      if (v === 0) continue;
      const black = v === 1;
      el("circle", { class: "shadow", cx: at(c) + 1.6, cy: at(r) + 2.4, r: cell * 0.47,
                     fill: "#000", "fill-opacity": 0.25 }, svg);
      el("circle", { class: black ? "stone black" : "stone white", cx: at(c), cy: at(r),
                     r: cell * 0.47, fill: black ? "#1c1c1c" : "#f6f5f0",
                     stroke: black ? "#000" : "#6a6a6a", "stroke-width": 1.6,
                     "data-row": r, "data-col": c }, svg);
      el("circle", { class: "shine", cx: at(c) - cell * 0.14, cy: at(r) - cell * 0.15,
                     r: cell * 0.18, fill: "#fff", "fill-opacity": black ? 0.16 : 0.7 }, svg);
    }
  }
  if (analysis && analysis.move) {
    const [r, c] = analysis.move;
    el("circle", { class: "agent-choice", cx: at(c), cy: at(r), r: cell * 0.5, fill: "none",
                   stroke: "#1f5fd6", "stroke-width": 2.5, "stroke-dasharray": "4 3" }, svg);
  }
  // Last move and winning line.
  if (state.last_move) {
    const [r, c] = state.last_move;
    el("circle", { class: "last-move", cx: at(c), cy: at(r), r: cell * 0.15, fill: "#e0352b",
                   stroke: state.board[r][c] === 1 ? "#fff" : "#000", "stroke-width": 1.2 }, svg);
  }
  if (state.win_line.length) {
    const first = state.win_line[0], last = state.win_line[state.win_line.length - 1];
    el("line", { class: "win-line", x1: at(first[1]), y1: at(first[0]), x2: at(last[1]),
                 y2: at(last[0]), stroke: "#e0352b", "stroke-width": 7, "stroke-opacity": 0.75,
                 "stroke-linecap": "round" }, svg);
  }

  // Click targets on top of everything, one per point.
  const cells = el("g", { class: "cells" }, svg);
  const humanStone = state.human === "black";
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      const group = el("g", { class: "cell-group" }, cells);
      const empty = state.board[r][c] === 0;
      const open = empty && !busy && state.turn === "human";
      el("circle", { class: open ? "ghost enabled" : "ghost", cx: at(c), cy: at(r),
                     r: cell * 0.45, fill: humanStone ? "#1c1c1c" : "#f6f5f0" }, group);
      const target = el("rect", { class: empty ? "cell" : "cell occupied",
                                  x: at(c) - cell / 2, y: at(r) - cell / 2, width: cell,
                                  height: cell, "data-row": r, "data-col": c }, group);
      el("title", {}, target).textContent = `(${r}, ${c})`;
      target.addEventListener("click", () => play(r, c));
    }
  }
}

function isMove(move, r, c) {
  return move && move[0] === r && move[1] === c;
}

function renderOverlayNote() {
  const note = $("overlay-note");
  if (!state) return;
  if (!state.agent.overlay) {
    note.textContent = `${state.agent.name} has no policy or value to show (rule-based ` +
      "agents and alpha-beta searches decide by rules, not by a distribution).";
    $("analyse").disabled = true;
    return;
  }
  $("analyse").disabled = busy || state.over;
  const a = shownAnalysis;
  if (!a) {
    note.textContent = "After the agent moves, its view of the position it moved from is shown; " +
      "or ask for its view of this position.";
    return;
  }
  const value = signed(a.value);
  const share = a.heat[a.move[0]][a.move[1]];
  const mover = a.to_move === "human" ? "you to move, its choice for you" : "it plays";
  let text = `Position after ${a.position} moves, ${mover}: (${a.move[0]}, ${a.move[1]}) ` +
    `(heat there ${Math.round(100 * share)}%, the dashed ring). ` +
    `Blue: ${a.heat_label}. Value: ${value} (${a.value_label}).`;
  if (a.network_value !== undefined) text += ` Network value ${signed(a.network_value)}.`;
  note.textContent = text;
}

// A value of the analysis with its sign; null: not a number (a network that overflowed).
function signed(v) {
  return v === null ? "not a number" : (v >= 0 ? "+" : "") + v.toFixed(3);
}

function renderMoves() {
  const list = $("moves");
  list.textContent = "";
  if (!state) return;
  state.moves.forEach((move, i) => {
    const item = document.createElement("li");
    const who = state.movers[i];
    item.className = who;
    const colour = i % 2 === 0 ? "B" : "W";
    item.textContent = move ? `${colour} (${move[0]}, ${move[1]})` : `${colour} illegal`;
    item.title = who === "human" ? "you" : state.agent.name;
    list.appendChild(item);
  });
  list.scrollTop = list.scrollHeight;
}

function render() {
  if (!state) return;
  $("game-id").textContent = `${state.game.size}x${state.game.size}, ${state.game.k} in a row, ` +
    `${state.game.rule}`;
  if (!busy || state.turn !== "agent") setStatus(statusText(), false);
  $("undo").disabled = busy || !state.can_undo;
  $("new-game").disabled = busy;
  renderBoard();
  renderOverlayNote();
  renderMoves();
}

// ---------------------------------------------------------------------- start
async function start() {
  $("settings").addEventListener("submit", newGame);
  $("undo").addEventListener("click", undo);
  $("analyse").addEventListener("click", analyse);
  $("overlay").addEventListener("change", render);
  $("agent").addEventListener("change", agentChanged);
  try {
    const agents = await api("GET", "/api/agents");
    for (const name of agents.baselines) {
      const option = document.createElement("option");
      option.value = name;
      $("agent-list").appendChild(option);
    }
    $("budget").max = agents.max_budget;
    $("rule").textContent = "";
    for (const rule of agents.rules) {
      const option = document.createElement("option");
      option.value = option.textContent = rule;
      $("rule").appendChild(option);
    }
    for (const id of ["size", "k"]) [$(id).min, $(id).max] = agents.sizes;
    state = await api("GET", "/api/state");
    syncSettings();
    render();
    if (state.turn === "agent") await run(replyIfAgentsTurn);
  } catch (e) {
    showError(e.message);
  }
}

start();
