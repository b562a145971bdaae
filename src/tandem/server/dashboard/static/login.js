// A login link (`tandem dashboard --open`) carries the token in the URL fragment, which the
// browser never sends to the server: take it, drop it from the address bar, post the form.
function fromLink() {
  var m = /(?:^#|&)token=([^&]+)/.exec(location.hash || "");
  if (!m) return;
  history.replaceState(null, "", location.pathname);
  var form = document.getElementById("login");
  document.getElementById("token").value = decodeURIComponent(m[1]);
  form.submit();
}
fromLink();
