// A hook file that does not parse: the build refuses it.
module.exports = async function (context) {
  return {status: 200, body: {children: [}};
};
