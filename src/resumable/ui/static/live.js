// Live pages: poll the JSON behind the page every second; when what it says changed (a
// run's records or status, the list's runs), fetch the page again and swap its main part
// in place, with no reload.
(function () {
  "use strict";
  var INTERVAL_MS = 1000;

  // What the page shows, in the words the server wrote into data-signature.
  function signature(data) {
    if (Array.isArray(data)) {
      return data.map(function (row) {
        return row.run_id + ":" + row.status + ":" + row.records;
      }).join(",");
    }
    return data.seq + ":" + data.status;
  }

  // On a run's timeline, show the record picked, else the newest one.
  function settle() {
    var list = document.querySelector("#timeline ol");
    if (!list) {
      return;
    }
    var picked = list.querySelector("li.picked");
    if (picked) {
      list.scrollTop = picked.offsetTop - list.offsetTop - list.clientHeight / 3;
    } else {
      list.scrollTop = list.scrollHeight;
    }
  }

  async function refresh() {
    var shown = document.querySelector("main[data-live='yes']");
    if (!shown) {
      return;
    }
    try {
      var answer = await fetch(shown.dataset.api, { cache: "no-store" });
      if (answer.ok && signature(await answer.json()) !== shown.dataset.signature) {
        var page = await fetch(window.location.href, { cache: "no-store" });
        if (page.ok) {
          var html = new DOMParser().parseFromString(await page.text(), "text/html");
          var fresh = html.getElementById(shown.id);
          if (fresh) {
            shown.replaceWith(fresh);
            settle();
          }
        }
      }
    } catch (error) {
      // the server is restarting or the network dropped: try again on the next tick
    }
    window.setTimeout(refresh, INTERVAL_MS);
  }

  settle();
  window.setTimeout(refresh, INTERVAL_MS);
})();
