// lockcheck report: hover details everywhere, and zoom and pan for the
// timeline. The page is complete without this script (every shape is drawn
// by the server and carries a <title>); the script only redraws positions
// from each shape's data-a and data-b, its start and end in seconds.
(function () {
  'use strict';
  var tip = document.getElementById('tip');

  // Hover: a tooltip that follows the pointer at once, instead of the
  // browser's own that waits a second. Titles become data-tip so the two do
  // not show together.
  document.querySelectorAll('svg title').forEach(function (t) {
    t.parentNode.setAttribute('data-tip', t.textContent);
    t.remove();
  });
  document.addEventListener('mousemove', function (e) {
    var el = e.target.closest && e.target.closest('[data-tip]');
    if (!el || dragging) {
      tip.hidden = true;
      return;
    }
    tip.textContent = el.getAttribute('data-tip');
    tip.hidden = false;
    var x = e.clientX + 14, y = e.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth - 8) x = e.clientX - tip.offsetWidth - 14;
    if (y + tip.offsetHeight > window.innerHeight - 8) y = e.clientY - tip.offsetHeight - 14;
    tip.style.left = Math.max(0, x) + 'px';
    tip.style.top = Math.max(0, y) + 'px';
  });

  var svg = document.getElementById('timeline');
  var dragging = false;
  if (!svg) return;
  var left = +svg.dataset.plotx, span = +svg.dataset.span, height = +svg.dataset.height;
  var right = 16, minSpan = 1e-4;
  var width = +svg.dataset.plotw;
  var view = [0, span];
  var axis = document.getElementById('tl-axis');
  var clip = document.getElementById('tl-clip-rect');
  var shown = document.getElementById('tl-shown');
  var ns = 'http://www.w3.org/2000/svg';
  var items = Array.prototype.map.call(svg.querySelectorAll('[data-a]'), function (el) {
    var a = +el.getAttribute('data-a');
    var b = el.hasAttribute('data-b') ? +el.getAttribute('data-b') : a;
    return { el: el, tag: el.tagName, a: a, b: b, w: +(el.getAttribute('data-w') || 0) };
  });

  function px(t) { return left + (t - view[0]) / (view[1] - view[0]) * width; }
  function round(v) { return Math.round(v * 10) / 10; }

  function niceStep(raw) {
    if (!(raw > 0)) return 1;
    var pow = Math.pow(10, Math.floor(Math.log10(raw)));
    var ms = [1, 2, 5, 10];
    for (var i = 0; i < ms.length; i++) if (raw <= ms[i] * pow) return ms[i] * pow;
    return 10 * pow;
  }

  function drawAxis() {
    while (axis.firstChild) axis.removeChild(axis.firstChild);
    var y = +svg.dataset.axisy;
    var step = niceStep((view[1] - view[0]) / (width / 100));
    var decimals = Math.max(0, -Math.floor(Math.log10(step)));
    var line = document.createElementNS(ns, 'path');
    line.setAttribute('class', 'axis');
    line.setAttribute('d', 'M' + left + ' ' + y + 'H' + (left + width));
    axis.appendChild(line);
    for (var t = Math.ceil(view[0] / step - 1e-9) * step; t <= view[1] + 1e-9; t += step) {
      var x = round(px(t));
      var grid = document.createElementNS(ns, 'path');
      grid.setAttribute('class', 'grid');
      grid.setAttribute('d', 'M' + x + ' ' + svg.dataset.ploty + 'V' + y + 'M' + x + ' ' + y + 'v4');
      axis.appendChild(grid);
      var text = document.createElementNS(ns, 'text');
      text.setAttribute('class', 'tick');
      text.setAttribute('x', x);
      text.setAttribute('y', y + 16);
      text.textContent = t.toFixed(decimals) + ' s';
      axis.appendChild(text);
    }
  }

  function draw() {
    for (var i = 0; i < items.length; i++) {
      var it = items[i], x0 = px(it.a), x1 = px(it.b);
      if (it.tag === 'rect') {
        it.el.setAttribute('x', round(x0));
        it.el.setAttribute('width', round(Math.max(1.5, x1 - x0)));
      } else if (it.tag === 'text') {
        // A state that began before the view still names itself at its left.
        var l = Math.max(x0, left), r = Math.min(x1, left + width);
        it.el.setAttribute('x', round(l + 3));
        it.el.classList.toggle('hidden', r - l < it.w);
      } else {
        it.el.setAttribute('transform', 'translate(' + round(x0) + ' 0)');
      }
    }
    drawAxis();
    shown.textContent = view[0].toFixed(3) + ' s to ' + view[1].toFixed(3) + ' s of ' + span.toFixed(3) + ' s';
  }

  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; draw(); });
  }

  // Fit the drawing to the page's width: zooming, not scrolling, shows detail.
  function layout() {
    width = Math.max(300, svg.parentNode.clientWidth - left - right - 2);
    var w = left + width + right;
    svg.setAttribute('width', w);
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + height);
    clip.setAttribute('width', width);
    draw();
  }

  function setView(a, b) {
    var w = Math.min(span, Math.max(minSpan, b - a));
    a = Math.max(0, Math.min(span - w, a));
    view = [a, a + w];
    redraw();
  }

  function zoomAt(t, factor) {
    var w = view[1] - view[0], f = (t - view[0]) / w;
    var nw = Math.min(span, Math.max(minSpan, w * factor));
    setView(t - f * nw, t - f * nw + nw);
  }

  function timeAt(clientX) {
    var r = svg.getBoundingClientRect();
    var x = (clientX - r.left) * (svg.viewBox.baseVal.width / r.width);
    return view[0] + (x - left) / width * (view[1] - view[0]);
  }

  svg.addEventListener('wheel', function (e) {
    e.preventDefault();
    if (e.shiftKey) {
      var w = view[1] - view[0];
      setView(view[0] + w * e.deltaY / 1000, view[1] + w * e.deltaY / 1000);
      return;
    }
    zoomAt(timeAt(e.clientX), Math.exp(e.deltaY * 0.002));
  }, { passive: false });

  var drag = null;
  svg.addEventListener('pointerdown', function (e) {
    if (e.button !== 0) return;
    drag = { x: e.clientX, view: view.slice(), moved: false };
  });
  window.addEventListener('pointermove', function (e) {
    if (!drag) return;
    var dx = e.clientX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = dragging = true;
    if (!drag.moved) return;
    var r = svg.getBoundingClientRect();
    var dt = dx * (svg.viewBox.baseVal.width / r.width) / width * (drag.view[1] - drag.view[0]);
    setView(drag.view[0] - dt, drag.view[1] - dt);
  });
  window.addEventListener('pointerup', function () {
    setTimeout(function () { dragging = false; }, 0);
    drag = null;
  });
  // A drag ends with a click on whatever is under the pointer: not a link.
  svg.addEventListener('click', function (e) {
    if (dragging) {
      e.preventDefault();
      e.stopPropagation();
    }
  }, true);
  svg.addEventListener('dblclick', function () { setView(0, span); });

  document.getElementById('tl-in').addEventListener('click', function () { zoomAt((view[0] + view[1]) / 2, 0.5); });
  document.getElementById('tl-out').addEventListener('click', function () { zoomAt((view[0] + view[1]) / 2, 2); });
  document.getElementById('tl-reset').addEventListener('click', function () { setView(0, span); });

  // Bring a shape of the timeline into view: zoom so that it fills about a
  // third of the plot, or shows two seconds around a point, and mark it.
  var focused = null;
  function focus(id) {
    var el = document.getElementById(id);
    if (!el || !svg.contains(el) || !el.hasAttribute('data-a')) return;
    var a = +el.getAttribute('data-a');
    var b = el.hasAttribute('data-b') ? +el.getAttribute('data-b') : a;
    var w = Math.max(3 * (b - a), Math.min(span, 2));
    var mid = (a + b) / 2;
    var nw = Math.min(span, w);
    view = [Math.max(0, Math.min(span - nw, mid - nw / 2)), 0];
    view[1] = view[0] + nw;
    draw();
    if (focused) focused.classList.remove('focus');
    focused = el;
    el.classList.add('focus');
  }
  // Runs before the browser follows the link, so it scrolls to the shape at
  // its new place.
  document.addEventListener('click', function (e) {
    var a = e.target.closest && e.target.closest('a[href^="#tl-"]');
    if (a) focus(a.getAttribute('href').slice(1));
  });
  window.addEventListener('hashchange', function () { focus(location.hash.slice(1)); });
  window.addEventListener('resize', layout);

  layout();
  if (location.hash.indexOf('#tl-') === 0) {
    focus(location.hash.slice(1));
    var target = document.getElementById(location.hash.slice(1));
    if (target) target.scrollIntoView({ block: 'center' });
  }
  svg.classList.add('live');
})();
