-- Argo CD health of an OCM ManifestWork, from the conditions OCM's work agent reports for the
-- current generation: Applied=False or Degraded=True is Degraded (with the agent's message),
-- Available=True is Healthy, anything else (not reported yet, or for an older generation) is
-- Progressing.
local hs = {status = "Progressing", message = "Waiting for OCM's work agent on the cluster"}
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local current = {}
for _, c in ipairs(obj.status.conditions) do
  if c.observedGeneration == nil or obj.metadata.generation == nil or c.observedGeneration == obj.metadata.generation then
    current[c.type] = c
  end
end
if current.Applied ~= nil and current.Applied.status == "False" then
  hs.status = "Degraded"
  hs.message = current.Applied.message
  return hs
end
if current.Degraded ~= nil and current.Degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = current.Degraded.message
  return hs
end
if current.Available ~= nil and current.Available.status == "True" then
  hs.status = "Healthy"
  hs.message = current.Available.message
  return hs
end
if current.Available ~= nil and current.Available.status == "False" then
  hs.message = current.Available.message
end
return hs
