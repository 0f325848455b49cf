// lockcheck serve: filter the index as the user types or picks, and keep
// the filter in the address, so a filtered view can be shared or reloaded.
(function () {
  'use strict';
  var text = document.getElementById('f-text');
  var kind = document.getElementById('f-kind');
  var backend = document.getElementById('f-backend');
  var verdict = document.getElementById('f-verdict');
  var count = document.getElementById('f-count');
  var rows = Array.prototype.slice.call(document.querySelectorAll('#runs tbody tr'));

  function apply() {
    var words = text.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var d = row.dataset;
      var hay = row.textContent.toLowerCase();
      var ok = (!kind.value || d.kind === kind.value) &&
        (!backend.value || d.backend === backend.value) &&
        (!verdict.value || d.verdict === verdict.value) &&
        words.every(function (w) { return hay.indexOf(w) >= 0; });
      row.hidden = !ok;
      if (ok) shown++;
    });
    count.textContent = shown + ' of ' + rows.length + ' shown';
    var q = new URLSearchParams();
    if (text.value) q.set('q', text.value);
    if (kind.value) q.set('kind', kind.value);
    if (backend.value) q.set('backend', backend.value);
    if (verdict.value) q.set('verdict', verdict.value);
    var s = q.toString();
    history.replaceState(null, '', s ? '?' + s : location.pathname);
  }

  var q = new URLSearchParams(location.search);
  text.value = q.get('q') || '';
  kind.value = q.get('kind') || '';
  backend.value = q.get('backend') || '';
  verdict.value = q.get('verdict') || '';
  [text, kind, backend, verdict].forEach(function (el) {
    el.addEventListener('input', apply);
    el.addEventListener('change', apply);
  });
  apply();
})();
